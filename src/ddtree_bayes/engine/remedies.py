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
3. a reparameterisation: every partially pooled offset flipped between centred and
   non-centred (``build_model(..., reparameterise=True)``).

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
#: Number of remedies (rungs); rung 2 may take one attempt per target acceptance step.
REMEDIES = 3


@dataclass
class Attempt:
    """One sampling attempt: its settings, the draws and what :func:`inference.diagnose` said."""

    settings: SamplerSettings
    reparameterised: bool
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
    reparameterised: bool


def ess_failed(failures: list[str]) -> bool:
    """Whether a failed gate is bulk ESS (the messages of :func:`inference.diagnose`)."""
    return any(f.startswith("min bulk ESS") for f in failures)


def rungs(requested: SamplerSettings, tried: list[Attempt]) -> Iterator[Rung]:
    """The ladder above ``requested``. ``tried`` holds the attempts so far (the latest one's
    failures decide whether the draws are doubled); advance the generator once per failed
    attempt, after appending it."""
    s = requested
    draws_doubled = False

    def more_draws(s: SamplerSettings) -> tuple[SamplerSettings, str]:
        nonlocal draws_doubled
        if draws_doubled or not ess_failed(tried[-1].failures):
            return s, ""
        draws_doubled = True
        return (dataclasses.replace(s, draws=2 * s.draws),
                f", draws {s.draws} -> {2 * s.draws}")

    tune = 2 * s.tune if s.tune else SamplerSettings.tune
    s, draws = more_draws(dataclasses.replace(s, tune=tune))
    yield Rung(1, "tuning", f"tuning {requested.tune} -> {tune}{draws}", s, False)
    for target in TARGET_ACCEPT_STEPS:
        if target <= s.target_accept:
            continue
        before = s.target_accept
        s, draws = more_draws(dataclasses.replace(s, target_accept=target))
        yield Rung(2, "target_accept", f"target acceptance {before:g} -> {target:g}{draws}", s,
                   False)
    s, draws = more_draws(s)
    yield Rung(3, "reparameterise", "pooled offsets flipped between centred and non-centred"
               + draws, s, True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _entry(remedy: int, kind: str, change: str, attempt: Attempt) -> dict:
    s = attempt.settings
    return {"remedy": remedy, "kind": kind, "change": change,
            "settings": {"chains": s.chains, "draws": s.draws, "tune": s.tune,
                         "target_accept": s.target_accept},
            "reparameterised": attempt.reparameterised, "passed": attempt.passed,
            "divergences": attempt.divergences, "failures": list(attempt.failures),
            "compile_s": attempt.timings.get("compile_s", 0.0),
            "sample_s": attempt.timings.get("sample_s", 0.0)}


def run(attempt: Callable[[SamplerSettings, bool], Attempt], requested: SamplerSettings, *,
        enabled: bool = True, say: Callable[[str], None] = _say) -> tuple[Attempt, dict]:
    """Sample with ``requested``; on failed gates climb the ladder (unless ``enabled`` is
    False). Returns the attempt to keep (the first that passed, else the last tried) and the
    record for the artifact: ``outcome`` "passed" (at once), "remedied" or "failed",
    ``remedy`` (the rung that passed, or None) and ``attempts`` (every attempt in order)."""
    current = attempt(requested, False)
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
    skipped_2 = requested.target_accept >= max(TARGET_ACCEPT_STEPS)
    for rung in rungs(requested, tried):
        if rung.remedy == 3 and skipped_2:
            say(f"fit: remedy 2/{REMEDIES} skipped: target acceptance already "
                f"{requested.target_accept:g}")
        say(f"fit: {'; '.join(current.failures)}; remedy {rung.remedy}/{REMEDIES}: {rung.change}")
        current = attempt(rung.settings, rung.reparameterised)
        tried.append(current)
        attempts.append(_entry(rung.remedy, rung.kind, rung.change, current))
        if current.passed:
            record.update(outcome="remedied", remedy=rung.remedy)
            say(f"fit: remedy {rung.remedy}/{REMEDIES} passed the gates "
                f"({current.divergences} divergences)")
            return current, record
    record["outcome"] = "failed"
    say(f"fit: still failing after remedy {REMEDIES}/{REMEDIES} ({'; '.join(current.failures)});"
        " the last attempt is saved, marked unconverged")
    return current, record


@dataclass
class ModelSampler:
    """Samples one model (built on demand per parameterisation, compiled once each) and
    diagnoses the draws: the ``attempt`` of :func:`run` for a real fit."""

    build: Callable[[bool], Any]
    seed: int
    progress: bool = True
    models: dict[bool, Any] = field(default_factory=dict)
    caches: dict[bool, dict] = field(default_factory=dict)

    def model(self, reparameterise: bool = False):
        if reparameterise not in self.models:
            self.models[reparameterise] = self.build(reparameterise)
            self.caches[reparameterise] = {}
        return self.models[reparameterise]

    def __call__(self, settings: SamplerSettings, reparameterise: bool) -> Attempt:
        from ddtree_bayes.engine import inference

        model = self.model(reparameterise)
        dt, timings, backend = inference.sample(model, settings, self.seed, self.progress,
                                                cache=self.caches[reparameterise])
        t0 = time.perf_counter()
        rows, divergences, failures = inference.diagnose(dt["posterior"].to_dataset(),
                                                         dt["sample_stats"].to_dataset())
        timings["diagnose_s"] = time.perf_counter() - t0
        return Attempt(settings, reparameterise, dt, timings, backend, rows, divergences,
                       failures)

"""Every command's `--format json` against the JSON Schema shipped in the package
(src/ddtree_bayes/schemas/<command>.schema.json, shown in docs/json-output.md).

Outputs come from real runs: a point-mass working directory (tests/test_cli_support.py) for
the commands that read a fit, the session's real fit for `fit` and `update` (the refit's
sampling replaced by that fit, as tests/test_living_update.py does), and small real runs
for `compare` and `validate`. `report` is checked in tests/test_report.py against the report
built there. The schemas are strict where the CLI builds the object (no undocumented keys),
so a new field must be documented to pass.
"""

from __future__ import annotations

import json
import re
import shutil
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from test_cli_support import (
    BEYOND_M33,
    FIT_ID,
    fitted_inputs,
    make_point_mass_workdir,
    run_cli,
    write_point_mass_fit,
)

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "tests" / "fixtures" / "bench"


@cache
def schema(command: str) -> dict:
    """The shipped schema of ``command`` (read through the installed package)."""
    text = (resources.files("ddtree_bayes") / "schemas" / f"{command}.schema.json").read_text()
    return json.loads(text)


def validate_output(command: str, payload) -> None:
    """Raise jsonschema.ValidationError unless ``payload`` fits the command's schema."""
    jsonschema.Draft202012Validator(schema(command)).validate(payload)


def json_of(work: Path, *argv: str):
    code, out, err = run_cli(work, *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def json_commands() -> set[str]:
    """Every (sub)command with ``--format json``, as its schema is named: ``hardware list`` ->
    ``hardware-list``."""
    import argparse

    from ddtree_bayes.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, prefix: str) -> set[str]:
        found = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, p in action.choices.items():
                    found |= walk(p, f"{prefix}{name}-")
        if prefix and any(a.dest == "format" and "json" in (a.choices or ())
                          for a in parser._actions):
            found.add(prefix.rstrip("-"))
        return found

    return walk(build_parser(), "")


def test_one_valid_schema_per_json_command():
    shipped = {p.name.removesuffix(".schema.json")
               for p in (resources.files("ddtree_bayes") / "schemas").iterdir()
               if p.name.endswith(".schema.json")}
    assert shipped == json_commands() == {
        "fit", "predict", "compare", "report", "validate", "add", "update", "history", "diff",
        "track", "optimize", "next", "hardware-list", "hardware-add", "card-add",
        "card-list"}
    for command in shipped:
        jsonschema.Draft202012Validator.check_schema(schema(command))
        assert schema(command)["title"] == f"ddtree-bayes {command.replace('-', ' ')} --format json"


def test_a_wrong_type_is_caught():
    """The schema can fail: acceptance as the old string, context as a float."""
    good = {"fit_id": "x", "seed": 1, "interval_probs": [0.5, 0.9], "target": None,
            "draws": 4, "rows": [{
                "hardware": "b300", "gpus": 8, "engine": "sglang", "method": "ddtree",
                "block": 16, "budget": 32, "verify_tokens": 33, "context_tokens": 0,
                "accept": 12.0, "accept_max": 17.0, "accept_max_rule": "block + 1",
                "accept_kind": "given", "accept_distribution": None,
                "median": 600.0, "lo50": 600.0, "hi50": 600.0, "lo90": 600.0, "hi90": 600.0,
                "original": None, "original_lo": None, "original_hi": None,
                "overhead_from": "measured"}], "default_scenario": None, "warnings": []}
    validate_output("predict", good)
    for key, bad in (("accept", "12"), ("context_tokens", 0.5), ("gpus", 0),
                     ("accept_max", "17"), ("undocumented", 1)):
        broken = json.loads(json.dumps(good))
        broken["rows"][0][key] = bad
        with pytest.raises(jsonschema.ValidationError):
            validate_output("predict", broken)


# ---------------------------------------------------------------- point-mass commands
@pytest.fixture(scope="module")
def pm(tmp_path_factory):
    return make_point_mass_workdir(tmp_path_factory.mktemp("schemas") / "w", noise_sd=0.05)


@pytest.fixture
def work(pm, tmp_path):
    return Path(shutil.copytree(pm, tmp_path / "w"))


def test_predict(work):
    out = json_of(work, "predict", "--accept", "12:16", "--target", "600")
    validate_output("predict", out)
    rows = {(r["engine"], r["accept_kind"], r["accept"]): r for r in out["rows"]}
    assert rows[("sglang", "given", 12.0)]["context_tokens"] == 0
    (uniform,) = [r for r in out["rows"] if r["accept_kind"] == "uniform" and r["engine"] == "sglang"]
    assert uniform["accept"] is None and uniform["accept_distribution"] == {
        "family": "uniform", "lower": 12.0, "upper": 16.0, "label": "U(12,16)"}
    prior = json_of(work, "predict", "--engine", "sglang", "--context", "32k")
    validate_output("predict", prior)
    (row,) = prior["rows"]
    assert row["accept"] is None and row["context_tokens"] == 32768
    assert row["accept_distribution"]["family"] == "truncnormal"  # the bundled B300 prior
    assert row["accept_distribution"]["params"]["lower"] == 1.0


def test_decisions_history_diff_track(work):
    validate_output("optimize", json_of(work, "optimize", "--budgets", "8,16,32"))
    nxt = json_of(work, "next", "--k", "4", "--query", "--accept 14")
    validate_output("next", nxt)
    assert nxt["query"]["accept"] == 14.0 and nxt["query"]["accept_distribution"] is None
    nxt = json_of(work, "next", "--k", "4", "--query", "--accept 12:16")
    validate_output("next", nxt)
    assert nxt["query"]["accept"] is None and nxt["query"]["accept_distribution"] == "U(12,16)"
    validate_output("history", json_of(work, "history"))
    validate_output("diff", json_of(work, "diff", "latest", FIT_ID))
    added = json_of(work, "track", "--hardware", "b300", "--engine", "native", "--budget", "32",
                    "--accept", "14")
    validate_output("track", added)
    assert added["now"]["rows"][0]["median"] > 0
    listed = json_of(work, "track", "list")
    validate_output("track", listed)
    assert [r["name"] for r in listed["rows"]] == ["default", added["query"]["name"]]
    validate_output("track", json_of(work, "track", "remove", added["query"]["name"]))


def test_add_and_from_bench(work):
    out = json_of(work, "add", "--hardware", "b300", "--engine", "sglang", "--method", "ddtree",
                  "--block", "16", "--budget", "32", "--accept", "13.1", "--tok-s", "612",
                  "--context", "32k", "--source", "schema test")
    validate_output("add", out)
    assert out["rows"][0]["context_tokens"] == 32768 and out["rows"][0]["accept_len"] == 13.1
    out = json_of(work, "add", "--from-bench", str(BENCH / "llama_bench.json"),
                  "--model", "llama-3.1-8b-instruct", "--gpus", "1", "--engine", "llama.cpp",
                  "--method", "ar")
    validate_output("add", out)
    # tg128 at depth 0 and 4096: + 129 / 2 = 64.5, rounded half to even
    assert [(r["hardware"], r["context_tokens"]) for r in out["rows"]] == [("h100", 64),
                                                                           ("h100", 4160)]


def test_compare_of_two_point_mass_forms(work):
    """Real PSIS-LOO on two point-mass fits (noise 0.05, power vs linear MoE form)."""
    for form, fit_id in (("power", "20260101T000001Z-power"), ("linear", "20260101T000002Z-lin")):
        write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                             work / "models" / "priors.toml", work / "data" / "hardware.csv",
                             fit_id=fit_id, n=400, moe_form=form, noise_sd=0.05, jitter=0.02)
    out = json_of(work, "compare", "--fits", "20260101T000001Z-power,20260101T000002Z-lin")
    validate_output("compare", out)
    assert sum(out["weights"].values()) == pytest.approx(1.0, abs=0.01)


# ---------------------------------------------------------------- on the session's real fit
@pytest.fixture
def real(fitted_workdir, tmp_path, monkeypatch):
    """A copy of the session fit's directory; `api.fit` returns that fit instead of sampling."""
    from ddtree_bayes import api

    work0, result = fitted_workdir
    work = Path(shutil.copytree(work0, tmp_path / "w"))
    (work / "data" / "measurements.csv").chmod(0o644)
    path = work / "models" / "fits" / result.path.name
    monkeypatch.setattr(api, "fit", lambda *a, **k: type(result)(
        **{**result.__dict__, "path": path}))
    return work


def test_fit_and_update(real):
    out = json_of(real, "fit")
    validate_output("fit", out)
    assert [r["context_tokens"] for r in out["posterior_predictive"]][:3] == [0, 0, 0]
    nothing = json_of(real, "update")
    validate_output("update", nothing)
    assert nothing["refit"] is None and nothing["new_rows"] == []
    assert run_cli(real, "add", "--hardware", "b300", "--engine", "sglang", "--method", "ddtree",
                   "--block", "16", "--budget", "32", "--accept", "13.1", "--tok-s", "612",
                   "--source", "HYPOTHETICAL schema test")[0] == 0
    refit = json_of(real, "update", "--refit")
    validate_output("update", refit)
    assert [r["row"] for r in refit["new_rows"]] == [11] and refit["refit"]["converged"]
    assert refit["made_by"] == "refit" and refit["refit_reasons"] == ["--refit"]
    (real / "models" / "latest.json").write_text(json.dumps(   # back to the 9-row fit
        {"fit_id": refit["previous_fit"], "file": f"fits/{refit['previous_fit']}.nc",
         "converged": True}))
    out = json_of(real, "update")      # the same row absorbed by a PSIS reweight
    validate_output("update", out)
    assert out["made_by"] == "psis-reweight" and out["refit"] is None
    assert out["reweight"]["converged"] and out["psis"]["pareto_k"] < 0.7


@pytest.fixture
def small_sampler(monkeypatch):
    """validate and sbc with a small sampler (the CLI passes none)."""
    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.workflows import validation as V

    small = SamplerSettings(chains=1, draws=60, tune=60)
    for name in ("validate", "sbc"):
        real_fn = getattr(V, name)
        monkeypatch.setattr(V, name, lambda *a, _f=real_fn, **k: _f(*a, settings=small, **k))


@pytest.mark.nuts
def test_validate(work, small_sampler):
    """Real leave-one-out refits of the two B300 rows. The small sampler's refits may fail
    their gates: their rows are listed, and counted in unconverged_rows, not in n."""
    out = json_of(work, "validate", "--quiet")
    validate_output("validate", out)
    assert [r["row"] for r in out["rows"]] == [2, 3]
    failed = {f["fold"] for f in out["folds"] if not f["converged"]}
    left = [r["row"] for r in out["rows"] if r["fold"] in failed]
    assert out["summary"]["unconverged_rows"] == left and out["summary"]["n"] == 2 - len(left)


@pytest.mark.nuts
def test_sbc(work, small_sampler):
    out = json_of(work, "validate", "--sbc", "2", "--quiet")
    validate_output("validate", out)
    assert out["replicates"] == 2 and len(out["replicate_results"]) == 2


def test_hardware_list(tmp_path):
    """The built-in table alone, then with a user's file that overrides one GPU and adds one."""
    payload = json_of(tmp_path, "hardware", "list")
    validate_output("hardware-list", payload)
    assert payload["user_file"] is None and len(payload["gpus"]) == 37
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "hardware.csv").write_text(
        "hardware,mem_bw_tb_s,interconnect,source\n"
        "rtx-4090,0.9,PCIe Gen4,my card at lowered memory clock\n"
        "my-gpu,1.2,PCIe Gen5,vendor sheet\n")
    payload = json_of(tmp_path, "hardware", "list")
    validate_output("hardware-list", payload)
    origins = {g["hardware"]: g["origin"] for g in payload["gpus"]}
    assert origins["rtx-4090"] == "user-override" and origins["my-gpu"] == "user"
    assert origins["h100"] == "built-in"


# ---------------------------------------------------------------- warnings in the JSON
NO_CONTEXT = ("--context 307200: the fit measured no context beyond 0: its cost per context "
              "token is the prior's (prior-driven)")
SGLNAG = ("--engine 'sglnag' was never measured, nor given a relation in the priors file: its "
          "speculative overhead is drawn from the pooled population (a wide interval); did you "
          "mean sglang?")


def warned_json(work: Path, *argv: str) -> tuple[dict, list[str]]:
    """A command's JSON and the warning lines it printed on stderr, without their prefix."""
    code, out, err = run_cli(work, *argv, "--format", "json")
    assert code == 0, err
    prefix = "ddtree-bayes: warning: "
    return json.loads(out), [line.removeprefix(prefix) for line in err.splitlines()
                             if line.startswith(prefix)]


def test_predict_json_carries_the_warnings(work):
    """`predict --format json` carried none of what the table warns of on stderr: a question
    the fit cannot check read as clean numbers."""
    out, printed = warned_json(work, "predict", "--accept", "14", "--context", "300k",
                               "--concurrency", "1,64")
    validate_output("predict", out)
    # (not also its tree's growth with M: one prior-driven line); a concurrency beyond the
    # measured ones is one of the warnings, and so is budget 32's tree at C = 1 and 64 (33 and
    # 64 x 33 = 2112 tokens a step, against budget 8's 9 measured): one sentence
    assert out["warnings"] == printed == [
        NO_CONTEXT,
        "C = 64 is beyond the concurrencies measured on b300x8 (at most 1); at C = 1, 64 a step "
        "verifies up to 2112 tokens (C x M), more than any measured on b300x8 (at most 9): there the "
        "step's growth with C and M is the roofline's (weights once per step, KV reads and "
        "tree nodes per stream, the compute knee, and for an MoE the distinct experts read): "
        "prior-driven"]
    one, printed = warned_json(work, "predict", "--accept", "14")
    validate_output("predict", one)
    assert one["warnings"] == printed == [BEYOND_M33]
    clean, printed = warned_json(work, "predict", "--accept", "4", "--block", "8", "--budget",
                                 "8")   # (the measured budget 8)
    validate_output("predict", clean)
    assert clean["warnings"] == printed == []


def test_next_and_optimize_json_carry_the_warnings(work):
    out, printed = warned_json(work, "next", "--k", "4", "--query",
                               "--accept 14 --context 300k --engine sglnag")
    validate_output("next", out)
    assert out["warnings"] == printed == [f"--query: {SGLNAG}", f"--query: {NO_CONTEXT}",
                                          f"--query: {BEYOND_M33}"]
    # optimize carried its own notes but not the names warning it printed
    out, printed = warned_json(work, "optimize", "--budgets", "8,16", "--context", "300k",
                               "--engine", "sglnag")
    validate_output("optimize", out)
    # (and budget 16's 17 tokens a step, past budget 8's 9 measured)
    assert out["warnings"] == printed == [
        SGLNAG, NO_CONTEXT,
        "at C = 1 a step of budget 16 (M = 17) verifies 17 tokens (C x M), more than any "
        "measured on b300x8 (at most 9): there the step's growth with M is the roofline's "
        "(compute knee, and for an MoE the distinct experts read): partly prior-driven"]


def test_track_diff_and_update_json_carry_the_warnings(work, monkeypatch):
    """A tracked query with a misspelt engine: track, diff and update printed predict's
    warning on stderr but their JSON carried nothing of it."""
    from ddtree_bayes import api
    from ddtree_bayes.engine.inference import FitResult

    added, printed = warned_json(work, "track", "--engine", "sglnag", "--accept", "14",
                                 "--name", "typo")
    validate_output("track", added)
    assert added["warnings"] == printed == [SGLNAG, BEYOND_M33]   # (budget 32 past 8)
    listed, _ = warned_json(work, "track", "list")   # (no question asked: nothing to warn of)
    validate_output("track", listed)
    # diff and update answer the tracked queries on both fits: the warning once, named (and
    # both queries' budget 32 past the measured 8)
    typo = [f"tracked query 'default': {BEYOND_M33}", f"tracked query 'typo': {SGLNAG}",
            f"tracked query 'typo': {BEYOND_M33}"]
    diffed, printed = warned_json(work, "diff", "latest", FIT_ID)
    validate_output("diff", diffed)
    assert diffed["warnings"] == printed == typo
    # update --refit (the sampling replaced by a second point-mass fit)
    second = write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                                  work / "models" / "priors.toml", work / "data" / "hardware.csv",
                                  fit_id="20260101T000001Z-second")
    (work / "models" / "latest.json").write_text(json.dumps(
        {"fit_id": FIT_ID, "file": f"fits/{FIT_ID}.nc", "converged": True}))
    monkeypatch.setattr(api, "fit", lambda *a, **k: FitResult(
        fit_id="20260101T000001Z-second", path=second, converged=True, failures=[],
        diagnostics=[], divergences=0))
    updated, printed = warned_json(work, "update", "--refit", "--quiet")
    validate_output("update", updated)
    assert updated["warnings"] == printed == typo
    from ddtree_bayes.engine import inference

    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))  # up to date:
    nothing, printed = warned_json(work, "update", "--quiet")   # no question asked
    validate_output("update", nothing)
    assert nothing["warnings"] == printed == []


# ------------------------------------------------------------------ docs/json-output.md
#: A table's caption naming the object it lists: the top level, or a path of properties
#: (``[]``: the items of an array), e.g. "`remedies.attempts`[]:" or "`psis` (when not null):"
DOC_CAPTION = re.compile(r"^(Top level|`([\w.]+)`(\[\])?)( \(.*\))?:$")


def doc_tables() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """docs/json-output.md's field tables: (section, caption) -> [(field, type)]. A row naming
    several fields (`median`, `lo`, `hi`) gives each; a pattern (`^(lo|hi)...`) none."""
    lines = (REPO / "docs" / "json-output.md").read_text(encoding="utf-8").splitlines()
    section, out = "", {}
    for i, line in enumerate(lines):
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("| field |"):
            caption = next(x for x in reversed(lines[:i]) if x.strip())
            rows = out.setdefault((section, caption), [])
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
                rows += [(name, cells[1]) for name in
                         re.findall(r"`([^`]+)`", cells[0].split(" (")[0])
                         if not name.startswith("^")]
    return out


def _branch(node: dict) -> dict:
    """The non-null branch of an ``anyOf``/``oneOf`` (a saved fit, not --compile-only)."""
    for key in ("anyOf", "oneOf"):
        if key in node:
            return _branch(next(b for b in node[key] if b.get("type") != "null"))
    return node


def _nullable(node: dict) -> bool:
    return node.get("type") == "null" or any(
        _nullable(b) for key in ("anyOf", "oneOf") for b in node.get(key, ()))


def test_docs_tables_list_each_schema_field_and_whether_it_may_be_null():
    """docs/json-output.md says its tables follow the schemas; nothing compared them: add,
    update and diff rows documented accept_len as `number` where the schemas allow null
    (`add --accept infer` prints null), and add, update and diff rows carried `concurrency`,
    listed nowhere. Each table whose caption names an object of a schema lists exactly that
    object's properties, and says "or null" exactly where the schema allows null."""
    checked, problems = 0, []
    for (section, caption), rows in doc_tables().items():
        m = DOC_CAPTION.match(caption)
        path = REPO / "src" / "ddtree_bayes" / "schemas" / f"{section.replace(' ', '-')}.schema.json"
        if m is None or not path.exists():
            continue   # prose captions (validate's modes, track, card add's derived values)
        node = _branch(json.loads(path.read_text()))
        for key in (m.group(2) or "").split(".") if m.group(2) else ():
            node = _branch(node["properties"][key])
            if node.get("type") == "array":
                node = _branch(node["items"])
        props = node["properties"]
        documented = [name for name, _ in rows]
        if sorted(documented) != sorted(props):
            problems.append(f"{section} {caption} lists {sorted(set(documented) - set(props))} "
                            f"the schema lacks and lacks {sorted(set(props) - set(documented))}")
        problems += [f"{section} {caption} `{name}` is {kind!r}, the schema "
                     f"{'allows' if _nullable(props[name]) else 'refuses'} null"
                     for name, kind in rows
                     if name in props and _nullable(props[name]) != (
                         kind.startswith("null or ") or kind.endswith(" or null"))]
        checked += 1
    assert checked >= 25 and problems == [], "\n".join(problems)
    # a measurement row (add's rows, update's removed_rows, diff's added and removed rows)
    # is a Measurement's fields: each is in the schemas (and so in the tables)
    import dataclasses

    from ddtree_bayes.core.data import Measurement

    fields = {f.name for f in dataclasses.fields(Measurement)}
    for command, key in (("add", "rows"), ("update", "removed_rows"), ("diff", "added_rows"),
                         ("diff", "removed_rows")):
        assert fields - set(schema(command)["properties"][key]["items"]["properties"]) == set()

"""No traceback, ever: every subcommand driven with generated flag values (numbers at and
past their bounds, negative, zero, empty strings, unicode, huge values, wrong types, missing
and unreadable files). Each run must exit 0, or exit 2 with ONE error line on stderr that
names the flag (or the file or value) and a fix, having written nothing; exit 3 only for a
well-formed fit id that does not exist. A successful ``--format json`` must validate against
the command's shipped schema.

The working directory holds a point-mass fit (tests/test_cli_support.py), so a command runs
in milliseconds; what would sample or compute for seconds is replaced by a fake that still
validates its inputs: ``api.fit`` (fit, update), ``report.write_report``,
``validation.validate``/``sbc`` and ``compare.compare_fits``. The default suite runs a few
derandomized examples per command; ``pytest -m slow`` runs the long profile.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_cli_support import FIT_ID, listing, make_point_mass_workdir, run_cli

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "tests" / "fixtures" / "bench"
COMMANDS = ("fit", "predict", "compare", "report", "validate", "simulate", "add", "update",
            "history", "diff", "track", "optimize", "next", "hardware", "card")
#: Commands whose first positional is a subcommand; their JSON schema is "<command>-<sub>".
NESTED = {"hardware": "list", "card": "add"}
FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=300, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- the working directory
@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A point-mass working directory (noise 0.05, so `next` can reweight) plus inputs/:
    valid, missing, empty, binary and directory paths for the file flags."""
    work = make_point_mass_workdir(tmp_path_factory.mktemp("props") / "w", noise_sd=0.05)
    inputs = work / "inputs"
    (inputs / "dir.csv").mkdir(parents=True)
    (inputs / "empty.csv").write_text("")
    (inputs / "binary.csv").write_bytes(b"\xff\xfe\x00\x81garbage\x00")
    header = (work / "data" / "measurements.csv").read_text().splitlines()[0]
    (inputs / "row.csv").write_text(header + "\nkimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,"
                                             "612,generated,\n")
    line1 = (BENCH / "sglang_serving.jsonl").read_text().splitlines()[0]
    (inputs / "bench.jsonl").write_text(line1 + "\n")
    shutil.copy(REPO / "tests" / "fixtures" / "cards" / "qwen3-30b-a3b" / "config.json",
                inputs / "config.json")
    for name in ("truth_dense_consumer.toml", "design_dense_consumer.csv"):
        shutil.copy(REPO / "data" / "examples" / name, inputs / name)
    shutil.copy(REPO / "data" / "acceptance_reference.csv", inputs / "acceptance.csv")
    shutil.copy(REPO / "data" / "public" / "trtllm_mtp_deepseek_r1_b200.csv", inputs / "sweep.csv")
    (inputs / "candidates.csv").write_text(
        "hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
        "b300,8,sglang,ddtree,16,32,14,0\n")
    return work


@pytest.fixture(scope="module")
def fakes():
    """Replace what would sample or compute for seconds by fakes that still validate."""
    from ddtree_bayes import api
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import compare, fitting, inference, store
    from ddtree_bayes.engine import remedies as R
    from ddtree_bayes.workflows import ar_kept as T
    from ddtree_bayes.workflows import extrapolation as X
    from ddtree_bayes.workflows import from_smallest as F
    from ddtree_bayes.workflows import report
    from ddtree_bayes.workflows import validation as V

    load_inputs = api.load_inputs

    def fit(data=None, priors=None, **kw):
        _, cfg = load_inputs(data, priors, kw.get("hardware"))
        if kw.get("moe_form") or kw.get("step_form"):
            fitting.with_forms(cfg, kw.get("moe_form"), kw.get("step_form"))
        path = store.resolve(paths.models_dir())
        # the ladder's own record of one attempt that passed at once (the fit schema needs it)
        passed = R.Attempt(settings=SamplerSettings(draws=1000), parameterisation="default",
                           dt=None, timings={}, backend="nutpie", diagnostics=[], divergences=0,
                           failures=[])
        _, ladder = R.run(lambda settings, parameterisation: passed, passed.settings)
        return inference.FitResult(fit_id=path.stem, path=path, converged=True, failures=[],
                                   diagnostics=[], divergences=0, timings={}, remedies=ladder)

    def compile_only(inputs, *, moe_form=None, step_form=None, progress=True):
        fitting.forms_of(inputs.priors, moe_form, step_form)   # what the real one checks
        return {"compile_s": 0.0, "cache": "cache", "cached": True}

    def write_report(fit_id=None, workdir=None, out_root=None, seed=0, priors=None):
        path = store.resolve(paths.models_dir(), fit_id)
        out = (out_root or Path.cwd() / "reports") / path.stem
        return out, {"fit_id": path.stem, "verdict": {
            "converged": True, "failures": [], "text": "converged: every gate passed"}}

    def validate(data=None, priors=None, *, group=None, seed=0, **kw):
        measurements, _ = load_inputs(data, priors)
        V.make_folds(measurements, group)
        blank = {"coverage50": None, "coverage90": None, "mdape": None, "mape": 0.0,
                 "mean_width90_rel": None}
        return {"data": str(measurements.path), "group": group or "row", "seed": seed,
                "settings": {}, "seconds": 0.0, "folds": [], "rows": [],
                "summary": {"n": 0, "posterior": blank, "baseline": {**blank, "n": 0}}}

    def sbc(data=None, priors=None, *, replicates=100, seed=0, **kw):
        load_inputs(data, priors)
        return {"replicates": replicates, "seed": seed, "settings": {}, "L": 99, "bins": 10,
                "seconds": 0.0, "unconverged": 0, "uniformity": {}, "min_p": 1.0,
                "replicate_results": []}

    def extrapolate(files=None, priors_path=None, *, structures=(), seed=0, **kw):
        from ddtree_bayes.workflows.extrapolation import load_sweeps

        files = files or sorted(Path("data", "public").glob("*.csv"))
        load_sweeps(files, paths.data_file("hardware.csv").read_text())   # validates the files
        score = {"n": 1, "coverage50": None, "coverage90": 1.0, "bias": 0.0, "mae": 0.0,
                 "width90": 0.1}
        return {"seed": seed, "settings": {}, "seconds": 0.0,
                "structures": {s: ["power", "fraction"] for s in structures}, "sweeps": [],
                "pooled": {s: score for s in (*structures, "baseline")}, "notes": [], "rows": []}

    def validate_keep_ar(data=None, priors=None, *, seed=0, **kw):
        from ddtree_bayes.workflows import ar_kept as T

        measurements, _ = load_inputs(data, priors)
        if not T.pair_splits(measurements)[0]:
            raise QueryError("--keep-ar: no pair to hold out", fix="give AR and speculative rows")
        empty = V.scores([])
        kinds = {k: empty for k in ("ar_kept", "whole_pair", "baseline", "baseline_whole_pair")}
        return {"data": str(measurements.path), "group": "pair", "keep_ar": True, "seed": seed,
                "settings": {}, "seconds": 0.0, "folds": [],
                "summary": {**kinds, "with_accept_len": kinds, "inferred_accept": kinds},
                "targets": {**T.TARGETS, "met": None}, "by_pair": [], "by_engine": {},
                "by_method": {}, "skipped_rows": [], "notes": [], "rows": []}

    def from_smallest(files=None, priors_path=None, *, structures=(), seed=0, **kw):
        from ddtree_bayes.core.errors import DataError
        from ddtree_bayes.workflows import from_smallest as F

        files = files or sorted(Path("data", "public").glob("*.csv"))
        if not files:
            raise DataError("no public sweep files", file="data/public/", fix="pass --sweeps")
        splits, notes = F.load_splits(files, paths.data_file("hardware.csv").read_text())
        if not splits:
            raise DataError("no split: " + "; ".join(notes), file=str(files[0]), fix="see docs")
        if kw.get("corpus") is not None:   # the real corpus reader: refuses a bad file
            F.with_corpus(splits, kw["corpus"], paths.data_file("hardware.csv").read_text(), {})
        score = {**V.scores([]), "by_ratio": {}}
        return {"mode": "from-smallest", "seed": seed, "settings": {}, "seconds": 0.0,
                "structures": {s: list(X.STRUCTURES[s]) for s in structures},
                "ratio_bins": [b for _, b in F.RATIO_BINS], "targets": F.TARGETS, "splits": [],
                "pooled": {**{s: {**score, "targets_met": None} for s in structures},
                           "baseline": score},
                "by_engine": {}, "notes": notes, "rows": []}

    def compare_fits(fits, seed=0, method="bb-pseudo-bma"):
        if len(fits) < 2:
            raise QueryError("need at least two fits to compare", fix="fit the other form")
        w = 1 / len(fits)
        rows = [{"model": f"{d.meta['fit_id']} ({d.meta['model']['moe_form']})", "rank": i,
                 "elpd_loo": 1.0, "p_loo": 1.0, "elpd_diff": 0.0, "se": 0.1, "dse": 0.0,
                 "weight": w, "pareto_k_above_0.7": 0, "pareto_k_threshold": 0.7,
                 "pareto_k_above_threshold": 0} for i, d in enumerate(fits)]
        return {"rows": rows, "weights": {d.meta["fit_id"]: w for d in fits},
                "method": method, "notes": []}

    with mock.patch.object(api, "fit", fit), \
            mock.patch.object(fitting, "compile_only", compile_only), \
            mock.patch.object(report, "write_report", write_report), \
            mock.patch.object(V, "validate", validate), mock.patch.object(V, "sbc", sbc), \
            mock.patch.object(compare, "compare_fits", compare_fits), \
            mock.patch.object(X, "extrapolate", extrapolate), \
            mock.patch.object(T, "validate_keep_ar", validate_keep_ar), \
            mock.patch.object(F, "from_smallest", from_smallest):
        yield


# ---------------------------------------------------------------- generated values
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=10)
INT = st.one_of(st.integers(-3, 70).map(str), st.sampled_from([
    "0", "-1", "1", "2", "1024", "1025", "4096", "4294967295", "4294967296", str(10**30),
    "9" * 5000, "1e3", "1.5", "", " ", "abc", "٣", "0x10", "1_0"]))
FLOAT = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.sampled_from([
    "0", "1", "-0.0", "0.5", "0.999999", "1e400", "-1e400", "nan", "inf", "", "x", "1e-320"]))
NAME = st.one_of(st.sampled_from([
    "b300", "h200", "rtx-pro-6000", "sglang", "native", "vllm", "ddtree", "eagle3", "ar",
    "sglnag", "b30", "ddtre", "SGLang", "sglang,native", "sglang,", ",", "", " b300"]), TEXT)
ACCEPT = st.one_of(st.sampled_from([
    "12", "14", "12:16", "12,14,16", "12:16:0.5", "1", "0", "0.5", "33", "34", "40", "16:12",
    "1:33:0.0033", "nan", "1e400", "", "x", "12:", ":", "12:16:0", "-5"]), FLOAT)
CONTEXT = st.one_of(st.sampled_from([
    "0", "32k", "1m", "32768", "-5", "", "1e9", "9" * 30, "9" * 400, "k", "1.5k", "64K"]), TEXT)
FIT = st.one_of(st.sampled_from([FIT_ID, "latest", "20990101T000000Z-nope", "", "../x",
                                 "a b", "-"]), TEXT)


def files(*valid: str):
    """A path for a file flag: a valid input, or missing, empty, binary, a directory."""
    return st.sampled_from([*(f"inputs/{v}" for v in valid), "inputs/missing.csv",
                            "inputs/empty.csv", "inputs/binary.csv", "inputs/dir.csv",
                            "inputs/ünïcode missing.toml"])


def choice(*options: str):
    return st.sampled_from([*options, "", "xml", "JSON"])


FLAG = None  # a flag without a value
SCENARIO = {"--hardware": NAME, "--gpus": INT, "--engine": NAME, "--method": NAME,
            "--block": INT, "--budget": INT, "--verify-tokens": INT, "--context": CONTEXT}
COMMON = {"--prob": FLOAT, "--fit": FIT, "--seed": INT, "--strict": FLAG,
          "--allow-unconverged": FLAG}
SPECS: dict[str, dict] = {
    "fit": {"--data": files("row.csv"), "--priors": files(), "--hardware-file": files(),
            "--chains": INT, "--draws": INT, "--tune": INT, "--target-accept": FLOAT,
            "--moe-form": choice("power", "linear"), "--backend": choice("nutpie", "pymc"),
            "--quiet": FLAG, "--seed": INT, "--format": choice("table", "json"),
            "--compile-only": FLAG},
    "predict": {**SCENARIO, **COMMON, "--accept": ACCEPT, "--target": FLOAT,
                "--model-average": FLAG, "--drafter": NAME,
                "--format": choice("table", "json", "csv")},
    "compare": {"--fits": st.one_of(st.sampled_from([f"{FIT_ID},{FIT_ID}", FIT_ID, ",",
                                                     f"{FIT_ID},nope"]), TEXT),
                "--weights": choice("bb-pseudo-bma", "stacking", "pseudo-bma"),
                "--seed": INT, "--format": choice("table", "json")},
    "report": {"--fit": FIT, "--out": st.one_of(st.sampled_from(
        ["out", "inputs/binary.csv", "/proc/forbidden", "inputs/dir.csv"]), TEXT),
        "--priors": files(), "--quiet": FLAG, "--seed": INT,
        "--format": choice("table", "json")},
    "validate": {"--data": files("row.csv"), "--priors": files(),
                 "--group": choice("hardware", "engine", "method", "budget", "pair"),
                 "--keep-ar": FLAG, "--from-smallest": FLAG, "--sbc": INT,
                 "--corpus": files("row.csv"),
                 "--jobs": INT, "--quiet": FLAG, "--seed": INT,
                 "--extrapolate": FLAG, "--sweeps": files("sweep.csv"),
                 "--structures": st.sampled_from(["structured", "fraction", "structured,fraction",
                                                  "", ",", "cubic", "Structured"]),
                 "--format": choice("table", "json")},
    "simulate": {"--truth": files("truth_dense_consumer.toml"),
                 "--design": files("design_dense_consumer.csv"),
                 "--out": st.sampled_from(["sim.csv", "inputs/dir.csv", "/proc/x/sim.csv"]),
                 "--seed": INT},
    "add": {**{k: NAME for k in ("--hardware", "--engine", "--method", "--model")},
            **{k: INT for k in ("--gpus", "--block", "--budget", "--verify-tokens")},
            "--accept": FLOAT, "--tok-s": FLOAT, "--context": CONTEXT, "--source": TEXT,
            "--notes": TEXT, "--from": files("row.csv"), "--from-bench": st.one_of(
                files("bench.jsonl"), st.sampled_from([str(p) for p in sorted(BENCH.iterdir())])),
            "--bench-format": choice("vllm-latency", "sglang-serving", "llama-bench"),
            "--bench-records": st.sampled_from(["1", "2", "1,2", "0", "", "x", "1-2", "2-1"]),
            "--single-stream-only": FLAG,
            "--batch-size": INT, "--output-len": INT, "--input-len": INT,
            "--allow-duplicate": FLAG, "--data": files("row.csv"),
            "--hardware-file": files(), "--format": choice("table", "json")},
    "update": {"--reject-surprises": FLAG, "--force": FLAG, "--data": files("row.csv"),
               "--priors": files(), "--hardware-file": files(), "--seed": INT,
               "--chains": INT, "--draws": INT, "--tune": INT,
               "--backend": choice("nutpie", "pymc"), "--moe-form": choice("power", "linear"),
               "--format": choice("table", "json"), "--quiet": FLAG},
    "history": {"--format": choice("table", "json")},
    "diff": {"--all": FLAG, "--seed": INT, "--format": choice("table", "json")},
    "track": {**SCENARIO, "--accept": ACCEPT, "--name": TEXT,
              "--format": choice("table", "json")},
    "optimize": {**COMMON, "--hardware": NAME, "--gpus": INT, "--engine": NAME,
                 "--method": NAME, "--block": INT, "--context": CONTEXT,
                 "--budgets": st.one_of(st.sampled_from(["8,16,32", "0", "", "8,,16", "1024",
                                                         "1000001", "x"]), TEXT),
                 "--acceptance-file": files("acceptance.csv"), "--priors": files(),
                 "--format": choice("table", "json")},
    "next": {**COMMON, "--query": st.one_of(st.sampled_from([
        "", "--accept 14", "--engine native --accept 12:16", "--gpus 0", "--budget x",
        "--accept 40", "--bogus 1", "'", "--hardware b30", "--context -5"]), TEXT),
        "--candidates": files("candidates.csv"), "--k": INT, "--min-ess": FLOAT,
        "--format": choice("table", "json")},
    "hardware": {"--hardware-file": files(), "--format": choice("table", "json")},
    "card": {"--hf-config": files("config.json"), "--gguf": files(), "--name": NAME,
             "--target": NAME, "--compute-dtype": choice("bf16", "fp8", "fp4", "int8"),
             "--bytes-per-weight": FLOAT, "--models-file": files(), "--drafters-file": files(),
             "--replace": FLAG, "--dry-run": FLAG, "--format": choice("table", "json")},
}
POSITIONAL = {"diff": st.lists(FIT, min_size=0, max_size=3),
              "hardware": st.one_of(st.just(["list"]), st.lists(st.sampled_from(["list", "x"]),
                                                                max_size=2)),
              "card": st.one_of(st.just(["add"]), st.lists(st.sampled_from(["add", "x"]),
                                                           max_size=2)),
              "track": st.lists(st.one_of(st.sampled_from(["add", "list", "remove", "x"]), TEXT),
                                max_size=2)}


@st.composite
def argv_for(draw, command: str) -> list[str]:
    spec = SPECS[command]
    flags = draw(st.lists(st.sampled_from(sorted(spec)), unique=True, max_size=6))
    argv = [command, *(draw(POSITIONAL[command]) if command in POSITIONAL else [])]
    for flag in flags:
        argv.append(flag)
        if spec[flag] is not None:
            argv.append(draw(spec[flag]))
    return argv


# ---------------------------------------------------------------- the property
def _names(argv: list[str]) -> set[str]:
    """How an error line may name what was wrong: a flag (given, or required and missing)
    as typed or as its column name, a positional's name, or a value (a path, a fit id)."""
    out = {"ID1", "ID2", "NAME", "action", "--help", *SPECS[argv[0]]}
    for tok in argv[1:]:
        if tok.startswith("--"):
            out |= {tok, tok[2:], tok[2:].replace("-", "_")}
        else:
            for part in {tok, *tok.split(",")}:
                if part.strip():
                    out |= {part.strip(), repr(part.strip())}
    return out


def check(work: Path, argv: list[str]) -> None:
    before = listing(work)
    code, out, err = run_cli(work, *argv)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert code in (0, 2, 3), (argv, code, err)
    if code == 0:
        if "--format" in argv and argv[argv.index("--format") + 1] == "json":
            from test_json_schemas import validate_output

            command = f"{argv[0]}-{argv[1]}" if argv[0] in NESTED else argv[0]
            validate_output(command, json.loads(out))
        return
    # a refused command writes nothing on standard output: not half a JSON/CSV document
    # (docs/json-output.md says so of every subcommand)
    assert out == "", (argv, code, out[:500])
    lines = err.splitlines()
    errors = [ln for ln in lines if ": error: " in ln]
    others = [ln for ln in lines if ln not in errors]
    assert len(errors) == 1, (argv, err)
    assert all(": warning: " in ln or ": note: " in ln or ln.startswith("[") for ln in others), (
        argv, err)
    line = errors[0]
    assert line.startswith("ddtree-bayes") and "(fix: " in line, (argv, line)
    assert any(name in line for name in _names(argv)), (argv, line)
    if code == 3:  # a fit id that does not exist: only when one was given
        assert "no fit" in line and any(f"'{t}'" in line for t in _names(argv)), (argv, line)
    assert {k: v for k, v in listing(work).items() if not k.endswith(".lock")} == {
        k: v for k, v in before.items() if not k.endswith(".lock")}, (argv, "wrote files")


def run_example(template: Path, argv: list[str]) -> None:
    base = Path(tempfile.mkdtemp(prefix="ddtree-prop-"))
    try:
        work = base / "w"
        shutil.copytree(template, work)
        check(work, argv)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("command", COMMANDS)
@FAST
@given(data=st.data())
def test_no_traceback_ever(template, fakes, command, data):
    run_example(template, data.draw(argv_for(command)))


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
@LONG
@given(data=st.data())
def test_no_traceback_ever_long(template, fakes, command, data):
    run_example(template, data.draw(argv_for(command)))


def test_every_command_has_a_spec():
    from ddtree_bayes.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS) == set(SPECS)


# ---------------------------------------------------------------- --help everywhere
@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in COMMANDS)],
                         ids=lambda a: " ".join(a))
def test_help_works_everywhere(tmp_path, argv):
    """The top-level --help used to crash on a '%' in a subcommand's help text."""
    code, out, err = run_cli(tmp_path, *argv)
    assert code == 0 and err == "", err
    assert out.startswith("usage: ddtree-bayes")
    assert "%%" not in out   # (a description is printed as written: no %-formatting)
    if argv == ["--help"]:
        for command in COMMANDS:
            assert f"\n    {command} " in out, command


@pytest.mark.parametrize("command", ["predict", "add", "track", "optimize"])
def test_context_help_says_it_is_the_prompt_plus_half_the_answer(tmp_path, command):
    """README's glossary and docs/howto/own-data.md define a context (``context_tokens``,
    ``--context``) as the mean KV a decode step reads, the prompt plus half the answer (1024
    in, 1024 out: 1536), the figure ``add --from-bench`` writes; every --help said "context
    length in tokens" (add: that, and the decode's mean KV with --from-bench alone), which
    reads as the prompt: a run typed in by hand went in at 1024 beside its own import at
    1536, and ``predict --context 1024`` asked about the 1536 runs' prompts."""
    code, out, err = run_cli(tmp_path, command, "--help")
    assert code == 0 and err == "", err
    flat = " ".join(out.split())
    assert ("--context CONTEXT the mean KV length a decode step reads, in tokens: the prompt "
            "plus half the answer (1024 in, 1024 out: 1536), e.g. 32768 or 32k (default: ") in flat
    if command == "add":
        assert ("with --from-bench: the file's, its input length plus half its output)"
                in flat)


def test_no_command_and_an_unknown_flag_are_one_line(tmp_path):
    for argv, what in ((), "COMMAND"), (("predict", "--bogus"), "--bogus"), (
            ("predict", "--format", "xml"), "choose from"):
        code, out, err = run_cli(tmp_path, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert what in err and "(fix: " in err


def test_a_flag_before_the_subcommand_is_named(tmp_path):
    """``hardware --format ''``: argparse reads the flag's value as the subcommand; the line
    names the flag and gives the command in the right order."""
    for argv, fix in ((("hardware", "--format", ""), "`ddtree-bayes hardware list --format ...`"),
                      (("card", "--bytes-per-weight", "4"),
                       "`ddtree-bayes card add --bytes-per-weight ...`")):
        code, out, err = run_cli(tmp_path, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err.startswith(f"ddtree-bayes: error: {argv[1]} comes before the subcommand"), err
        assert fix in err, err
    code, out, err = run_cli(tmp_path, "hardware", "lst")   # no flag: argparse's own line
    assert code == 2 and "invalid choice: 'lst' (fix: choose from 'list', 'add')" in err, err


def test_accept_help_says_where_the_default_acceptance_comes_from(tmp_path):
    """`predict --help` said the --accept default is "the scenario's acceptance prior from
    the priors file"; predict takes, in order, 1 for AR, the configuration's mean measured on
    the same system (this engine's rows, else the other engines'), the posterior of an
    acceptance the fit inferred, the priors' acceptance prior, then the configuration's mean
    measured on other systems
    (engine/question.accept_sources). track's --accept shares the text."""
    for command in (("predict",), ("track",)):
        code, out, err = run_cli(tmp_path, *command, "--help")
        assert code == 0 and err == "", err
        text = " ".join(out.split())
        assert ("Default: 1 for ar; else the mean accept_len measured of the configuration on "
                "the same system (this engine's rows if any, else the other engines': an "
                "engine without rows there takes theirs); else the posterior of the acceptance "
                "the fit inferred for it (rows without accept_len); else the priors file's "
                "[[acceptance]] entry for it; else the mean accept_len measured of it on any "
                "system; the row's accept says which") in text, command


def test_drafter_help_says_a_measured_drafter_takes_its_rows_acceptance(tmp_path):
    """`predict --help` said --drafter is "for a drafter you have not measured ... give
    --accept (its acceptance is not measured)"; since the drafter column, a drafter the fit's
    rows name takes their measured accept_len, else the acceptance the fit inferred from them,
    and only a drafter no row names asks --accept (engine/question.drafter_acceptance)."""
    code, out, err = run_cli(tmp_path, "predict", "--help")
    assert code == 0 and err == "", err
    text = " ".join(out.split())
    assert "you have not measured" not in text and "its acceptance is not measured" not in text
    assert ("the acceptance of the fit's rows that name it in their drafter column (measured, "
            "else inferred), else the priors' [[acceptance]] entry that names it (drafter = "
            "NAME); give --accept for a drafter neither names") in text


def test_optimize_help_caps_the_curve_at_the_block_as_predict_does(tmp_path):
    """A new-user walkthrough: `optimize --help` said the acceptance curve is capped at "block +
    1 for DDTree, as predict --accept is"; predict, the README and core/methods.py max_accept
    cap a DDTree step at its block (the block starts with the anchor: 16 for block 16)."""
    from ddtree_bayes.core.methods import max_accept

    assert max_accept("ddtree", 16, 32).tokens == 16
    code, out, err = run_cli(tmp_path, "optimize", "--help")
    assert code == 0, err
    text = " ".join(out.split())
    assert "block + 1" not in text and "block+1" not in text
    assert ("capped at the most tokens a step can emit, as predict --accept is: the block for "
            "DDTree, whose block starts with the anchor)") in text


def test_prose_and_help_give_the_dflash_and_ddtree_bound_of_block(tmp_path):
    """DFlash's and DDTree's block starts with the anchor (depth = "block - 1"): a step emits
    at most block tokens and a DFlash chain verifies its block. ask.md still said a DDTree of
    block 16 "emits at most 17 tokens per step (16 accepted plus the bonus token)", own-data.md
    "block + 1 for DDTree", `add --verify-tokens` "chain block+1" and json-output.md's prior
    "upper": 17 (the bundled prior's upper is 16, never above accept_max)."""
    from ddtree_bayes.core.methods import max_accept

    assert max_accept("ddtree", 16, 32).tokens == 16 == max_accept("dflash", 16, None).tokens
    docs = REPO / "docs"

    def prose(name: str) -> str:   # (without the generated examples)
        text = re.sub(r"<!-- example: .*?<!-- /example -->", "",
                      (docs / name).read_text(encoding="utf-8"), flags=re.S)
        return " ".join(text.split())

    ask, own, js = prose("howto/ask.md"), prose("howto/own-data.md"), prose("json-output.md")
    assert "17 tokens" not in ask and "block + 1 for DDTree" not in own and "17" not in js[
        js.index("Without `--accept` the row's `accept` is `null`"):][:400]
    assert ("a DDTree tree with block 16 emits at most 16 tokens per step (15 drafted after "
            "the block's anchor plus the bonus token)") in ask
    assert "(block for DFlash and DDTree, whose block starts with the anchor" in own
    assert '"upper": 16}, "label": "prior truncnormal(mu=10, sigma=2.5, lower=1, upper=16)"}' in js
    code, out, err = run_cli(tmp_path, "add", "--help")
    assert code == 0, err
    text = " ".join(out.split())
    assert "chain block+1" not in text
    assert ("tokens verified per step (default: derived: ar 1, tree budget+1, chain depth+1: "
            "block for DFlash, whose block starts with the anchor, else block+1)") in text

"""CLI commands of the living posterior that write: add (update is in ``cli.update``), and the
parser of all five.

Same conventions as ``cli.main``: one-line errors through the named exceptions (exit 2 bad
input with nothing written, 3 no usable fit, 5 a refit failed its convergence gates),
``--format json`` where the output is a table. The library side is ``workflows.living``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddtree_bayes.cli.args import accept_cell
from ddtree_bayes.cli.history import cmd_diff, cmd_history, cmd_track
from ddtree_bayes.cli.output import (
    PROG,
    ROW_FLAGS,
    counted,
    default_data_path,
    emit_json,
    print_warnings,
    shown_path,
)
from ddtree_bayes.cli.update import cmd_update
from ddtree_bayes.core.config import DEFAULT_SEED
from ddtree_bayes.core.errors import InputError
from ddtree_bayes.core.paths import data_flag

#: ``add`` flags that only make sense with --from-bench.
BENCH_FLAGS = ("bench_format", "bench_records", "single_stream_only", "batch_size", "output_len",
               "input_len")


# ---------------------------------------------------------------- add
def _context_tokens(text: str | None) -> str:
    if text is None:
        return ""
    from ddtree_bayes.engine import predictive as P

    value = P.parse_context(text)
    assert value is not None
    return str(int(value)) if float(value).is_integer() else repr(value)


def _methods_table(cfg) -> tuple[dict, bool, dict[str, set[str]], float]:
    """The ``[methods]`` table of the project's priors ``cfg`` (``models/priors.toml``, else
    the bundled priors): what ``fit`` will bound each row's accept_len by; whether ``fit``
    refuses a speculative method the table does not declare (the structured step form);
    the engines and methods the priors declare (a new row's name one edit from one is warned
    of); and the context ``fit`` reads a blank one at (``default_context_tokens``)."""
    return (cfg.methods, cfg.step_form == "structured", cfg.declared_names(),
            cfg.default_context_tokens)


def _as_fit(table, cfg):
    """What ``fit`` refuses of a measurement file before sampling, as a check ``add`` runs on
    the file it appends to (the same call: ``FitInputs.read`` and ``check``), given the
    hardware table and priors ``add`` read and the file's rows as it read them under its
    lock (each input read once). Returns the model cards and drafter cards it read."""
    def check(path: Path, current) -> tuple[dict, tuple]:
        from ddtree_bayes.engine.fitting import FitInputs

        inputs = FitInputs.read(path, table=table, cfg=cfg, measurements=current).check()
        return inputs.file_cards, inputs.drafters
    return check


def cmd_add(args: argparse.Namespace) -> int:
    from ddtree_bayes.core import paths
    from ddtree_bayes.workflows import living

    data_path = default_data_path(args.data)
    # --data NEW.csv starts a file; data/measurements.csv only in a workspace (a data/ that
    # card add or hardware add wrote to), never in a folder of someone else's data/
    workspace = None if args.data is not None or data_path.exists() else paths.workspace_file()
    create = args.data is not None or workspace is not None
    bench_only = [f"--{f.replace('_', '-')}" for f in BENCH_FLAGS if getattr(args, f) is not None]
    if args.from_file and args.from_bench:
        raise InputError("--from and --from-bench cannot be combined",
                         fix="add the CSV and the benchmark file in two `add` calls")
    if bench_only and not args.from_bench:
        raise InputError(f"{', '.join(bench_only)} only appl{'y' if len(bench_only) > 1 else 'ies'}"
                         " to --from-bench",
                         fix="add --from-bench FILE, or drop them")
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.hardware_table import hardware_table

    table = hardware_table(None, args.hardware_file)
    hardware = table.rows
    # bounds accept_len by what each row's configuration can emit; refuses what fit refuses
    cfg = load_priors(paths.priors_file())
    methods, declared, known, blank_context = _methods_table(cfg)
    as_fit = _as_fit(table, cfg)
    kept: list[str] = []   # warnings on rows a benchmark file gave
    noted: list[str] = []  # what the file held and was not imported
    if args.from_file:
        given = [f"--{f.replace('_', '-')}" for f in ROW_FLAGS if getattr(args, f) is not None]
        if given:
            raise InputError(f"--from cannot be combined with {', '.join(given)}",
                             fix="put every value in the --from file, or drop --from")
        rows = living.rows_from_file(Path(args.from_file))
        result = living.append_rows(data_path, hardware, rows,
                                    allow_duplicate=args.allow_duplicate, what=args.from_file,
                                    methods=methods, declared=declared, create=create,
                                    known=known, default_context=blank_context,
                                    check_existing=as_fit)
    elif args.from_bench:
        from ddtree_bayes.workflows.card_files.gpu import editions
        from ddtree_bayes.workflows.living.bench import CONFIG_KEYS, rows_from_bench

        for flag in ("tok_s", "concurrency"):
            if getattr(args, flag) is not None:
                raise InputError(f"--{flag.replace('_', '-')} comes from the --from-bench file",
                                 fix=f"drop --{flag.replace('_', '-')}, or add the row without "
                                     "--from-bench")
        if args.method is None:   # (the engine comes from a file that names it)
            raise InputError("--from-bench needs --method, the data's name of the decoding "
                             "method the run used (ar, eagle3, mtp, ddtree, ...)",
                             fix="give the benchmarked configuration, e.g. --method ddtree "
                             "--budget 32 (and --engine when the file does not name it, "
                             "--hardware when it does not name its GPU)")
        got = rows_from_bench(
            Path(args.from_bench), {k: getattr(args, k) for k in CONFIG_KEYS},
            hardware_names=set(hardware), fmt=args.bench_format,
            accept=accept_cell(args.accept, args.method),
            context=_context_tokens(args.context) or None,
            source=args.source, notes=args.notes, batch_size=args.batch_size,
            output_len=args.output_len, input_len=args.input_len,
            records=None if args.bench_records is None else set(args.bench_records),
            single_stream_only=bool(args.single_stream_only),
            editions=editions(table))   # (your --like GPUs: the file names the one copied)
        rows, noted = got.rows, got.notes
        kept = got.warnings   # (both said once the rows are in: an error is one line)
        result = living.append_rows(data_path, hardware, rows,
                                    allow_duplicate=args.allow_duplicate,
                                    what=args.from_bench if len(rows) > 1 else None,
                                    methods=methods, declared=declared, create=create,
                                    known=known, default_context=blank_context,
                                    check_existing=as_fit)
        if got.model_unsaid:   # (the file's run may be of any model: said, not assumed)
            models = sorted({m.model for m in result.rows})
            kept = [*kept, f"{args.from_bench}: the file names no model; its "
                           f"{'rows were' if len(result.rows) > 1 else 'row was'} filed under "
                           f"{', '.join(models)}, the model of {shown_path(result.path)} (if the "
                           "run was of another model, remove "
                           f"{'them' if len(result.rows) > 1 else 'it'} and import the file "
                           "again with --model <card>)"]
    else:
        from ddtree_bayes.core.data import AR_METHOD

        if args.method == AR_METHOD and args.accept is None:
            args.accept = "1"   # (the only acceptance an autoregressive step has)
        missing = [f"--{f.replace('_', '-')}" for f in ("hardware", "engine", "method", "accept",
                                                        "tok_s", "source")
                   if getattr(args, f) is None]
        if missing:
            # (--accept infer is refused for ar, whose acceptance is 1 without the flag)
            hint = ("" if args.method == AR_METHOD else
                    " (--accept infer when the run did not report its acceptance)")
            raise InputError(f"missing {', '.join(missing)}",
                             fix=f"give the measured configuration and result{hint}, or "
                                 "--from FILE.csv")
        values: dict[str, str | None] = {
            "model": args.model, "hardware": args.hardware, "gpus": args.gpus,
            "engine": args.engine, "method": args.method, "block": args.block or "",
            "budget": args.budget or "", "verify_tokens": args.verify_tokens or "",
            "accept_len": accept_cell(args.accept, args.method),
            "context_tokens": _context_tokens(args.context),
            "tok_s": args.tok_s, "source": args.source, "notes": args.notes or "",
            "concurrency": str(args.concurrency) if args.concurrency else None,
            "drafter": args.drafter}
        row = living.NewRow(f"{data_path} (new row)", None, values, flags=True)
        result = living.append_rows(data_path, hardware, [row],
                                    allow_duplicate=args.allow_duplicate, methods=methods,
                                    declared=declared, create=create, known=known,
                                    default_context=blank_context,
                                    check_existing=as_fit)
    for note in noted:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    warned: list[str] = []
    print_warnings([*kept, *result.warnings], warned)   # (on stderr in the JSON form too)
    if args.format == "json":
        emit_json({"file": str(result.path), "created": result.created,
                   "total_rows": result.total_rows,
                   "rows": [{**r.__dict__, "repeat_of": result.repeats.get(r.row)}
                            for r in result.rows],
                   "warnings": warned})
        return 0
    if result.created:
        print(f"created {shown_path(result.path)} with the standard header"
              + ("" if workspace is None else
                 f" ({shown_path(workspace)} makes this folder a workspace: its fits read this "
                 "file from now on, not the bundled measurements)"))
    n = len(result.rows)
    print(f"appended {counted(n, 'row')} to {shown_path(result.path)} "
          f"(now {counted(result.total_rows, 'measurement')}):")
    for m in result.rows:
        note = f" (repeat of row {result.repeats[m.row]})" if m.row in result.repeats else ""
        step = ("acceptance inferred by the fit" if m.step_ms is None
                else f"step {m.step_ms:.1f} ms")
        # the model too: a row of the wrong model read like any other (and --from-bench takes
        # the file's model, as a card)
        print(f"  row {m.row}: {m.model}, {living.describe_row(m)}, {step}{note}")
    pronoun = 'them' if n != 1 else 'it'
    if _has_fit():
        print(f"next: `{PROG} update{data_flag(result.path)}` scores {pronoun} against the latest "
              "fit and reweights its posterior or refits")
    else:   # (update would stop: "no fit found ... run `ddtree-bayes fit` first")
        print(f"next: `{PROG} fit{data_flag(result.path)}` fits the file (there is no fit here "
              f"yet for `{PROG} update` to score {pronoun} against)")
    return 0


def _has_fit() -> bool:
    """Is there a latest fit here for `update` to score new rows against (engine/store.py
    ``resolve``, which update starts with)?"""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import ArtifactError
    from ddtree_bayes.engine import store

    try:
        store.resolve(paths.models_dir())
    except ArtifactError:
        return False
    return True


# ---------------------------------------------------------------- parser
def _untracked(fix: str):
    """A type= function refusing any value: a predict flag a tracked query cannot hold."""
    def refuse(text: str) -> None:
        raise argparse.ArgumentTypeError(f"{text!r}: not tracked (fix: {fix})")
    return refuse


def _query_flags(p: argparse.ArgumentParser) -> None:
    from ddtree_bayes.cli.args import ACCEPT_HELP, accept, add_scenario_arguments, drafter_name
    from ddtree_bayes.core.query_flags import add_kv_cache_argument, add_new_deployment_argument

    add_scenario_arguments(p)
    p.add_argument("--accept", type=accept, help=ACCEPT_HELP)
    add_kv_cache_argument(p, capped="the query's intervals, now and as update and diff print "
                                    "them")
    p.add_argument("--drafter", metavar="NAME", type=drafter_name,
                   help="a drafter card's name, as predict --drafter takes it: the query is "
                        "answered, now and by update and diff, with that drafter's passes and "
                        "acceptance")
    add_new_deployment_argument(p)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the main parser."""
    from ddtree_bayes.cli import args as A
    from ddtree_bayes.cli.args import add_format
    from ddtree_bayes.core.bench_import import FORMATS
    from ddtree_bayes.core.query_flags import CONTEXT_HELP

    a = sub.add_parser(
        "add", help="append a validated measurement to data/measurements.csv",
        description="Append one measurement (flags), many (--from FILE.csv, same columns as "
                    "data/measurements.csv) or a benchmark tool's results (--from-bench FILE) "
                    "to the measurement file, validated as "
                    "`fit` validates it, and refused when its model's card says the GPUs "
                    "cannot hold the weights even at 1.125 bits per weight (kept with a warning "
                    "when they hold them only below the card's own bytes per weight: a "
                    "fit prices the card's bytes). A step shorter than reading the card's "
                    "active weights at Q1_0's 1.125 bits per weight over the GPUs' full "
                    "bandwidth is refused (no quantisation reads less: `fit` refuses it too); "
                    "one shorter than reading them at the card's own bytes, or a context "
                    "longer than the "
                    "card's max_context_tokens, is kept with a warning (a deployment "
                    "quantised below the card's bytes, or with its RoPE scaled further). "
                    "All or nothing: "
                    "one bad row in --from rejects the whole file, every problem listed with "
                    "its file, row and column (exit 2). "
                    "A row identical to an existing one is refused; --allow-duplicate "
                    "appends a true repeat with 'repeat of row N' added to its notes (the file "
                    "may not hold two identical rows). The file stays plain CSV: edit it by "
                    "hand if you like, `fit`/`update` validate it. Safe to run in parallel: a "
                    "lock (.measurements.csv.lock) is held across read-validate-write and the "
                    "file is replaced atomically.",
        epilog="Example: ddtree-bayes add --hardware b300 --engine sglang --method ddtree "
               "--block 16 --budget 32 --accept 13.1 --tok-s 612 --source \"my run 2026-12-01\". "
               "From a benchmark file: ddtree-bayes add --from-bench result.jsonl --hardware "
               "b300 --engine sglang --method eagle3 --block 3; a sweep's batch-1 runs: add "
               "--single-stream-only")
    # the row's values are checked by the data schema (core.data.parse_row), whose messages
    # name the row and column they would land in
    a.add_argument("--hardware", help="GPU name from data/hardware.csv (required; with --from-bench "
                                      "only when the file does not name a GPU of that table, "
                                      "and refused when the file names another GPU)")
    a.add_argument("--gpus", type=A.number_text,
                   help="GPU count (default: with --from-bench, the count the benchmark file "
                        "records (llama-bench's gpu_info devices, vLLM latency's tensor x "
                        "pipeline parallel size), refused when it differs; else the count "
                        "of the same model's rows on that hardware in the file, said in a "
                        "warning (never another model's); an error if none or several)")
    a.add_argument("--engine", help="engine, e.g. sglang (required; with --from-bench only "
                                    "when the file does not name it: llama-bench is llama.cpp, "
                                    "vllm bench latency vllm, sglang.bench_one_batch sglang, a "
                                    "serving result its backend; refused when it names another)")
    a.add_argument("--method", help="ar, ddtree, eagle3, ... (required)")
    a.add_argument("--block", type=A.number_text, help="drafter block size / chain length")
    a.add_argument("--budget", type=A.number_text, help="tree node budget")
    a.add_argument("--verify-tokens", type=A.number_text,
                   help="tokens verified per step (default: derived: ar 1, tree budget+1, "
                        "chain depth+1: block for DFlash, whose block starts with the anchor, "
                        "else block+1)")
    a.add_argument("--accept", type=A.number_text,
                   help="accepted tokens per step incl. the bonus token, i.e. the accept_len "
                        "column (required, but 1 and the default for ar; with --from-bench "
                        "only when the file has no acceptance length). 'infer' leaves it "
                        "blank for a speculative run that did not report it: the fit infers "
                        "one acceptance per (model, method, block, budget) from such rows")
    a.add_argument("--context", type=A.context,
                   help=f"{CONTEXT_HELP}, e.g. 32768 or 32k (default: blank, which the "
                        "fit reads as the priors' default_context_tokens, 0 as bundled; with "
                        "--from-bench: the file's, its input length plus half its output)")
    a.add_argument("--concurrency", type=A.whole(1, A.MAX_CONCURRENCY, "give the stream count, e.g. "
                                                 "--concurrency 8"),
                   help="streams decoded together in the run (default: 1); --tok-s is then "
                        "their total. A file without the column gets it (blank = 1)")
    a.add_argument("--drafter", metavar="NAME",
                   help="the drafter card (data/drafters.csv or built in) the run drafted "
                        "with, when not its target's default card for the method: the row's "
                        "drafter column (refused unless the card drafts that method for that "
                        "model and is not its default card). A file without the column gets "
                        "it (blank = the default card)")
    a.add_argument("--tok-s", type=A.number_text,
                   help="measured decode throughput in tok/s (required): one stream's, or with "
                        "--concurrency C the C streams' total")
    a.add_argument("--source", help="where the number comes from (required; with "
                                    "--from-bench default: tool, file and record)")
    a.add_argument("--notes", help="free text, e.g. driver or engine version")
    a.add_argument("--model", help="target model (default: the file's model; required when it "
                                   "holds several; a model with a card in data/models.csv that "
                                   "the file does not hold yet makes it a file of several models). "
                                   "With --from-bench: the card of the model the benchmark file "
                                   "names (default: the card whose name that is; refused when the "
                                   "file names another card's model or one of a clearly "
                                   "different size; a card of the size of the model a "
                                   "quantised name is without its tag, such as your card of "
                                   "Qwen3-30B-A3B-FP8, is taken)")
    a.add_argument("--from", dest="from_file", metavar="FILE.csv",
                   help="append every row of this CSV (header as in data/measurements.csv)")
    a.add_argument("--from-bench", metavar="FILE",
                   help="import a benchmark tool's result file: vllm bench latency "
                        "--output-json, vllm bench serve --save-result, sglang.bench_one_batch "
                        "--result-filename, sglang.bench_serving --output-file, llama-bench -o "
                        "json/jsonl/csv (serving runs at concurrency C > 1 go to the "
                        "concurrency column; other batched runs are refused); the model and "
                        "GPU come from "
                        "the file when it names them, the rest of the configuration from the "
                        "flags above")
    a.add_argument("--bench-format", choices=FORMATS,
                   help="the --from-bench file's format (default: detected; checked against "
                        "the file, so it only settles a serving result that has neither "
                        "vLLM's nor SGLang's own keys)")
    a.add_argument("--bench-records", metavar="N[,M-K]", type=A.record_list,
                   help="import only these records of the --from-bench file (numbered as its "
                        "error messages number them: JSON record or line; ranges as 2-5); "
                        "the others are not read further, so a sweep or a file with a broken "
                        "line imports the records picked")
    a.add_argument("--single-stream-only", action="store_true", default=None,
                   help="import only the --from-bench file's single-stream records (batch size "
                        "or concurrency 1) and leave out the others with a note (a sweep "
                        "such as --batch-size 1 8 16; without it a serving run at C > 1 is "
                        "imported at C)")
    a.add_argument("--batch-size", type=A.whole(1, 1_000_000, "use --batch-size 1"),
                   help="vllm bench latency's --batch-size (its JSON does not record it)")
    a.add_argument("--output-len", type=A.whole(1, 10_000_000, "e.g. --output-len 128"),
                   help="vllm bench latency's --output-len (its JSON does not record it)")
    a.add_argument("--input-len", type=A.whole(0, 10_000_000, "e.g. --input-len 512"),
                   help="vllm bench latency's --input-len (not in its JSON): the row's context "
                        "is it plus half --output-len")
    a.add_argument("--allow-duplicate", action="store_true",
                   help="append a row identical to an existing one as a true repeat; its notes "
                        "get 'repeat of row N' so the file stays valid (a --from-bench result "
                        "already imported, under any file name, is one run and still refused)")
    a.add_argument("--data", help="measurement file (default: ./data/measurements.csv)")
    a.add_argument("--hardware-file", help="hardware table CSV (default: data/hardware.csv)")
    add_format(a)
    a.set_defaults(func=cmd_add)

    u = sub.add_parser(
        "update", help="score new measurements, reweight the latest fit or refit, show what "
                       "changed",
        description="1) Score every measurement added since the latest fit (rows of the data "
                    "file not in the data stored in that fit) against its posterior "
                    "predictive: percentile, and a SURPRISE flag outside the 1st-99th "
                    "percentile (a possible regime change: new driver, kernel or engine "
                    "version). A system without measurements is scored by hardware transfer; "
                    "a row the fit cannot predict at all is reported as such. 2) If every new "
                    "row is unsurprising and of a configuration the fit has parameters for "
                    "(same systems, overhead groups, priors, hardware table), reweight the "
                    "fit's draws by the new rows' likelihood with Pareto-smoothed importance "
                    "sampling (Vehtari et al. 2024) and save the importance resample as a new "
                    "fit, in about a second; its Pareto k is shown. Otherwise, or when k > "
                    "min(0.7, 1 - 1/log10(draws)), or the reweighted draws keep fewer than 400 "
                    "effective draws, or with --refit: refit on all data, exactly (NUTS; same "
                    "sampler settings and seed as the latest fit unless given), and report "
                    "the time and why. 3) Print each tracked query's 90% interval before -> "
                    "after (the default scenario at accept 14, plus `ddtree-bayes track` "
                    "queries). Nothing to do when data, priors and hardware table are "
                    "unchanged since the latest fit.",
        epilog="Exit codes: 0 ok, 2 bad input (invalid data file, or a surprise with "
               "--reject-surprises: nothing refitted), 3 no fit to update (run `fit` first), "
               "5 the refit failed its convergence gates. docs/cli.md ('update without a refit') says "
               "how the reweighted fit is made and what its diagnostics mean.")
    u.add_argument("--reject-surprises", action="store_true",
                   help="stop with exit 2 (nothing refitted) if any new measurement is a surprise")
    u.add_argument("--force", action="store_true", help="refit even when nothing changed")
    u.add_argument("--refit", action="store_true",
                   help="refit with NUTS even when the new rows could be absorbed by reweighting")
    u.add_argument("--data", help="measurement CSV (default: data/measurements.csv)")
    u.add_argument("--priors", help="priors TOML (default: models/priors.toml)")
    u.add_argument("--hardware-file", help="hardware table CSV (default: data/hardware.csv)")
    u.add_argument("--seed", type=A.SEED, help="seed for scoring, refit and queries (default: the "
                                            "latest fit's)")
    u.add_argument("--chains", type=A.CHAINS,
                   help="NUTS chains of a refit (default: the latest fit's; giving it refits)")
    u.add_argument("--draws", type=A.DRAWS,
                   help="draws per chain of a refit (default: the latest fit's; giving it refits)")
    u.add_argument("--tune", type=A.TUNE,
                   help="tuning steps per chain (default: the latest fit's; giving it refits)")
    u.add_argument("--backend", choices=("nutpie", "pymc"),
                   help="NUTS implementation (default: the latest fit's; giving it refits)")
    u.add_argument("--moe-form", choices=("roofline", "power", "linear"),
                   help="MoE cost form of the refit (default: the latest fit's; another one "
                        "refits)")
    u.add_argument("--step-form", choices=("structured", "fraction"),
                   help="SPEC form of the refit (default: the latest fit's; another one "
                        "refits)")
    add_format(u)
    u.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    u.set_defaults(func=cmd_update)

    h = sub.add_parser("history", help="list saved fits (id, time, data hash, rows, converged)",
                       description="Every fit in models/fits/, oldest first, from the metadata "
                                   "stored in each file.")
    add_format(h)
    h.set_defaults(func=cmd_history)

    d = sub.add_parser("diff", help="parameter and tracked-query changes between two fits",
                       description="Measurements added/removed, posterior median and 90% "
                                   "interval of every scalar parameter, and each tracked query's "
                                   "90% interval, from fit A to fit B ('latest' names the "
                                   "latest fit; ids are listed by `ddtree-bayes history`).")
    d.add_argument("fit_a", metavar="ID1", type=A.fit_id)
    d.add_argument("fit_b", metavar="ID2", type=A.fit_id)
    d.add_argument("--all", action="store_true", help="include the non-centred *_z auxiliaries")
    d.add_argument("--seed", type=A.SEED, default=DEFAULT_SEED,
                   help="seed for the tracked queries (default: %(default)s)")
    add_format(d)
    d.set_defaults(func=cmd_diff)

    t = sub.add_parser("track", help="save a predict query whose interval update/diff report",
                       description="`track [add] FLAGS` saves a predict-style query in "
                                   "models/tracked.json (predict's configuration flags, "
                                   "--accept and --kv-cache, one stream: --concurrency is not "
                                   "tracked); `track list` "
                                   "lists them; `track remove NAME` removes one. The default "
                                   "scenario at accept 14 is always tracked.")
    t.add_argument("action", nargs="?", choices=("add", "list", "remove"),
                   help="add (default), list or remove")
    t.add_argument("target", nargs="?", metavar="NAME", help="the query to remove")
    t.add_argument("--name", help="name of the new query (default: made from its flags)")
    _query_flags(t)
    # (so that `track --concurrency 8` says so, not "invalid choice: '8'" for the action)
    t.add_argument("--concurrency", help=argparse.SUPPRESS, type=_untracked(
        "tracked queries answer one stream; ask `ddtree-bayes predict --concurrency` for C > 1"))
    add_format(t)
    t.set_defaults(func=cmd_track)

"""Command line: parses arguments, calls the library, prints. Nothing imports this module.

Exit codes: 0 ok; 1 unexpected error; 2 bad input (nothing written); 3 no usable fit;
4 stale fit with --strict; 5 fit failed its convergence gates; 130 interrupted by SIGINT or
SIGTERM (nothing written).
"""
from __future__ import annotations

import argparse
import io
import os
import sys

from ddtree_bayes.cli import args as A
from ddtree_bayes.cli.analysis import cmd_report, cmd_simulate, cmd_validate
from ddtree_bayes.cli.args import ACCEPT_HELP, add_scenario_arguments, add_seed_and_format
from ddtree_bayes.cli.fit import cmd_compare, cmd_fit
from ddtree_bayes.cli.output import PROG
from ddtree_bayes.cli.predict import cmd_predict
from ddtree_bayes.core import __version__, interrupts, per_call
from ddtree_bayes.core.config import SamplerSettings
from ddtree_bayes.core.errors import FULL_ERRNOS, DDTreeBayesError
from ddtree_bayes.core.query_flags import (
    add_kv_cache_argument,
    add_new_deployment_argument,
    whole_number,
)


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = A.Parser(
        prog=PROG,
        description="Bayesian throughput estimates for speculative decoding (DDTree, Eagle, "
                    "autoregressive) of LLMs on GPUs: fit a three-term step model to "
                    "measurements, then ask for posterior tok/s intervals.",
        epilog="Typical use: `ddtree-bayes fit && ddtree-bayes predict --accept 12:16`. "
               "Exit codes: 0 ok, 2 bad input (nothing written), 3 no usable fit, "
               "4 stale fit with --strict, 5 fit not converged, 130 interrupted (SIGINT or "
               "SIGTERM; nothing written).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    f = sub.add_parser("fit", help="fit the model to the measurements and save the posterior",
                       description="Validate the measurements and priors, sample the posterior "
                                   "with NUTS, check convergence (R-hat <= 1.01, bulk ESS >= 400, "
                                   "no divergences) and save models/fits/<fit-id>.nc.")
    f.add_argument("--data", help="measurement CSV (default: data/measurements.csv here, else "
                                  "the bundled Kimi K2.6 data)")
    f.add_argument("--priors", help="priors TOML (default: models/priors.toml, else bundled)")
    f.add_argument("--hardware-file", help="hardware table CSV (default: data/hardware.csv)")
    f.add_argument("--chains", type=A.CHAINS, default=SamplerSettings.chains,
                   help="NUTS chains, 1 to 64 (default: %(default)s)")
    f.add_argument("--draws", type=A.DRAWS, default=None,
                   help="draws per chain (default: 1000, or 3000 for a model of more than 100 "
                        "free parameters, such as several models in one fit: the gates take "
                        "the least bulk ESS over all of them)")
    f.add_argument("--tune", type=A.TUNE, default=SamplerSettings.tune,
                   help="tuning steps per chain (default: %(default)s)")
    f.add_argument("--target-accept", type=A.TARGET_ACCEPT, default=SamplerSettings.target_accept,
                   help="NUTS target acceptance (default: %(default)s; see docs/model.md)")
    f.add_argument("--moe-form", choices=("roofline", "power", "linear"),
                   help="override the priors file's MoE form (to compare forms: see `compare`)")
    f.add_argument("--step-form", choices=("structured", "fraction"),
                   help="override the priors file's SPEC form: structured (fixed + drafter "
                        "passes + tree nodes) or fraction (a fixed share of the step)")
    f.add_argument("--backend", choices=("nutpie", "pymc"), default="nutpie",
                   help="NUTS implementation (default: %(default)s; pymc is the fallback)")
    f.add_argument("--no-remedy", action="store_true",
                   help="sample once: no remedy ladder when the gates fail (by default a failed "
                        "fit retries with longer tuning, then a higher target acceptance, then "
                        "a reparameterisation, one stderr line each; docs/validation.md)")
    f.add_argument("--quiet", action="store_true",
                   help="no progress messages on stderr (remedy lines still print)")
    f.add_argument("--compile-only", action="store_true",
                   help="compile the model these inputs give into the on-disk cache and stop: "
                        "nothing is sampled or saved, and the sampler flags (--chains, "
                        "--draws, --tune, --target-accept, --seed, --no-remedy) are refused. "
                        "The next fit of the same inputs loads it instead of spending ~30 s "
                        "in numba (scripts/bootstrap.sh runs it once on the bundled data; "
                        "docs/performance.md)")
    add_seed_and_format(f, formats=("table", "json"))
    f.set_defaults(func=cmd_fit)

    p = sub.add_parser("predict", help="posterior tok/s intervals for a configuration",
                       description="Posterior predictive throughput. With no configuration "
                                   "flags: B300, DDTree block 16, budget 32 (verify 33), SGLang "
                                   "and native engines (for a fit that never measured B300: "
                                   "its most-measured configuration), beside the original "
                                   "deterministic estimate and its +-30% band.")
    p.add_argument("--accept", type=A.accept, help=ACCEPT_HELP)
    p.add_argument("--target", type=A.real(0, 1e9, "give a throughput in tok/s, e.g. --target 800"),
                   help="also print P(tok/s >= TARGET) (with --concurrency: one user's tok/s)")
    p.add_argument("--prob", type=A.PROB, default=0.9,
                   help="probability of the wide interval (default: %(default)s; 50%% is always shown)")
    add_scenario_arguments(p)
    p.add_argument("--drafter", metavar="NAME", type=A.drafter_name,
                   help="a drafter card's name (data/drafters.csv or built in): its passes "
                        "cost its roofline times the per-pass multiple the engine showed with "
                        "the measured drafter; its acceptance is the acceptance of the fit's "
                        "rows that name it in their drafter column (measured, else inferred), "
                        "else the priors' [[acceptance]] entry that names it (drafter = NAME); "
                        "give --accept for a drafter neither names")
    add_kv_cache_argument(p)
    add_new_deployment_argument(p)
    p.add_argument("--concurrency", type=A.int_list(1, A.MAX_CONCURRENCY, "give stream counts, e.g. "
                                                    "--concurrency 1,4,8,16"),
                   metavar="C[,C...]",
                   help="streams decoded together: one answer per value, per user (one "
                        "stream's tok/s) and total (the C streams'); default: one stream")
    p.add_argument("--fit", type=A.fit_id, help="fit id (default: the latest fit)")
    A.add_fit_checks(p)
    p.add_argument("--model-average", action="store_true",
                   help="mix the latest converged fit of each model form (MoE form / step "
                        "form) on the same data, "
                        "weighted by PSIS-LOO pseudo-BMA+ (see `compare`)")
    p.add_argument("--explain", action="store_true",
                   help="say why each interval is as wide as it is: the share of its variance "
                        "from the acceptance, the target step, the speculative overhead and "
                        "the run noise, each with where its draws come from (fitted, "
                        "transferred, carried or prior-driven); JSON: each row's 'explain'")
    add_seed_and_format(p, formats=("table", "json", "csv"))
    p.set_defaults(func=cmd_predict)

    c = sub.add_parser("compare", help="compare model forms (e.g. power vs linear MoE) by PSIS-LOO",
                       description="PSIS-LOO (arviz-stats compare) of fits made on the same "
                                   "data, weighted by --weights (default bb-pseudo-bma). Default "
                                   "fits: the latest converged fit of each model form (MoE form / "
                                   "step form, e.g. roofline/structured and roofline/fraction) on "
                                   "the latest fit's data; fit another form with `ddtree-bayes "
                                   "fit --step-form fraction` or `--moe-form linear`.")
    c.add_argument("--fits", type=A.fit_ids, help="comma-separated fit ids to compare instead")
    c.add_argument("--weights", choices=("bb-pseudo-bma", "stacking", "pseudo-bma"),
                   default="bb-pseudo-bma",
                   help="how to weight the models (default: %(default)s, which hedges for the "
                        "uncertainty of elpd; stacking is winner-take-all on little data)")
    add_seed_and_format(c, formats=("table", "json"))
    c.set_defaults(func=cmd_compare)

    r = sub.add_parser("report", help="diagnostics, checks and figures of a fit -> reports/<fit-id>/",
                       description="Write reports/<fit-id>/index.html (self-contained), summary.md "
                                   "and summary.json: sampling diagnostics, prior vs posterior, "
                                   "posterior predictive check, PSIS-LOO and LOO-PIT, prior "
                                   "sensitivity, throughput fan chart, variance decomposition and "
                                   "step-time breakdown. Exits 5 if the fit is unconverged (the "
                                   "report is still written and says so at the top).")
    r.add_argument("--fit", type=A.fit_id, help="fit id (default: the latest fit)")
    r.add_argument("--model", type=A.model_name,
                   help="target model of the default-scenario sections (required when the fit "
                        "holds several models)")
    r.add_argument("--out", help="folder to write <fit-id>/ into (default: reports/)")
    r.add_argument("--priors", help="priors TOML holding [acceptance_curve] for the budget "
                                    "section (default: the fit's priors file, else "
                                    "models/priors.toml, else bundled)")
    r.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    add_seed_and_format(r, formats=("table", "json"))
    r.set_defaults(func=cmd_report)

    v = sub.add_parser("validate", help="exact leave-one-out coverage vs the original +-30%%, or SBC",
                       description="Refit the model with each measurement (or each group) held "
                                   "out, using the production sampler settings, and check where "
                                   "the truth falls in the predictive intervals; the original "
                                   "deterministic formula is refit by least squares on the same "
                                   "folds for comparison. --sbc N runs simulation-based "
                                   "calibration instead.")
    v.add_argument("--data", help="measurement CSV (default: data/measurements.csv)")
    v.add_argument("--priors", help="priors TOML (default: models/priors.toml)")
    v.add_argument("--group", choices=("hardware", "engine", "method", "budget", "model", "pair"),
                   help="leave one group out instead of one measurement (model: all rows of a "
                        "target model; pair: all rows of a (model, system) pair; both predicted "
                        "as never measured)")
    v.add_argument("--keep-ar", action="store_true",
                   help="with --group pair: hold out only each pair's speculative rows, keep its "
                        "AR rows in training (we measured AR here: what will speculative decoding "
                        "give?), beside the whole pair held out and the original +-30%%")
    v.add_argument("--sbc", type=whole_number, metavar="N",
                   help="simulation-based calibration with N replicates")
    v.add_argument("--plot", help="with --sbc: write the rank histograms to this PNG")
    v.add_argument("--extrapolate", action="store_true",
                   help="per public sweep (data/public/*.csv), hold out the deepest / largest-M "
                        "configurations, fit the rest and score the held-out ones, for each step "
                        "structure and the original formula's +-30%%")
    v.add_argument("--from-smallest", action="store_true",
                   help="with --extrapolate: per sweep and method, fit AR plus the smallest "
                        "configuration only and predict every larger one; scores by "
                        "extrapolation ratio M_predicted / M_trained")
    v.add_argument("--corpus", metavar="CSV",
                   help="with --from-smallest: fit each sweep beside this measurement file's "
                        "rows (e.g. data/examples/public_multi_model.csv), less those of the "
                        "sweep's own model (under any deployment name) on its own system")
    v.add_argument("--concurrency", action="store_true",
                   help="with --extrapolate: per concurrency sweep (data/public/conc/*.csv) fit "
                        "the rows at C <= --train-concurrency, predict those at "
                        "--test-concurrency, and compare the crossover where speculation "
                        "stops paying")
    v.add_argument("--train-concurrency", type=A.whole(1, A.MAX_CONCURRENCY, "e.g. --train-concurrency 4"),
                   help="with --concurrency: the largest C fitted (default: 4)")
    v.add_argument("--test-concurrency",
                   type=A.int_list(1, A.MAX_CONCURRENCY, "e.g. --test-concurrency 8,16"),
                   help="with --concurrency: the C predicted and scored (default: 8,16)")
    v.add_argument("--sweeps", nargs="+", metavar="CSV",
                   help="with --extrapolate: sweep files (default: data/public/*.csv; with "
                        "--concurrency data/public/conc/*.csv)")
    v.add_argument("--structures", type=A.name_list(
                       "structure", "e.g. --structures structured,fraction"),
                   help="with --extrapolate: step structures to compare (default: "
                        "structured,fraction; with --from-smallest: structured)")
    v.add_argument("--jobs", type=A.whole(1, 1024, "give worker processes, e.g. --jobs 2"),
                   default=1, help="parallel worker processes (default: %(default)s)")
    v.add_argument("--scheduler", help="dask.distributed scheduler address (e.g. tcp://host:8786): "
                                       "run folds on that cluster instead")
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    add_seed_and_format(v, formats=("table", "json"))
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser("simulate", help="write a synthetic measurement file from known parameters",
                       description="Simulate C=1 throughput measurements for DESIGN.csv rows "
                                   "(hardware, gpus, engine, method, block, budget, accept_len, "
                                   "context_tokens; an optional model column must name the "
                                   "truth file's model) under the parameters in PARAMS.toml "
                                   "(see docs/validation.md), with lognormal run-to-run noise.")
    s.add_argument("--truth", required=True, help="PARAMS.toml with the true parameters")
    s.add_argument("--design", required=True, help="DESIGN.csv: the configurations to simulate")
    s.add_argument("--out", help="write here (atomically) instead of standard output")
    add_seed_and_format(s, formats=())
    s.set_defaults(func=cmd_simulate)

    from ddtree_bayes.cli import cards as cli_cards
    from ddtree_bayes.cli import decisions as cli_decisions
    from ddtree_bayes.cli import hardware as cli_hardware
    from ddtree_bayes.cli import living as cli_living

    cli_living.register(sub)
    cli_decisions.register(sub)
    cli_hardware.register(sub)
    cli_cards.register(sub)
    return parser


def _remove_stale_temps() -> None:
    """The temp files a killed fit/update left in models/ and models/fits/: removed, said."""
    from ddtree_bayes.cli.output import shown_path
    from ddtree_bayes.core import paths
    from ddtree_bayes.engine import store

    for tmp in store.remove_stale_temps(paths.models_dir()):
        print(f"{PROG}: note: removed {shown_path(tmp)}, a temporary file left by an interrupted "
              "write (a killed fit or update); the saved fits are whole", file=sys.stderr)


class _ReaderMayLeave(io.TextIOBase):
    """The process's standard output, carried on after its reader leaves (``ddtree-bayes
    update | head -2``): the rest of the output goes to the null device and the command
    finishes its work (an update or fit is still saved), instead of stopping half-way at
    the first write after ``head`` exits."""

    def __init__(self, stream):
        self._stream, self.left = stream, False

    def _leave(self) -> None:
        self.left = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._leave()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._leave()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self):  # type: ignore[override]
        return self._stream.encoding

    @property
    def errors(self):  # type: ignore[override]
        return self._stream.errors

    def reconfigure(self, **kw) -> None:
        self._stream.reconfigure(**kw)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. SIGINT and SIGTERM stop it with exit 130 and nothing
    written (core/interrupts.py); called without ``argv`` (the console script, ``python -m``)
    it ignores both once the command is over, through the interpreter's teardown."""
    if argv is None and sys.stdout is sys.__stdout__ and sys.stdout is not None:
        sys.stdout = _ReaderMayLeave(sys.stdout)
    with interrupts.handled(last=argv is None) as signals:
        try:
            code = _main(argv, signals)
        except KeyboardInterrupt:   # in the instant between the command's end and this line
            signals.done = True
            print(f"{PROG}: interrupted; nothing was written", file=sys.stderr)
            return 130
        signals.done = True
        if signals.late:  # the work was saved before the signal: the command finished
            print(f"{PROG}: note: {signals.late[0]} arrived after {signals.saved} was saved; "
                  "the command finished", file=sys.stderr)
    if argv is None:   # the process ends now: no garbage collection in its teardown
        _freeze_garbage()
    return code


def _freeze_garbage() -> None:
    """The interpreter's teardown ran full garbage collections over every object a command
    leaves (~440,000 after a fit: PyMC's and PyTensor's graphs), ~0.35 s of a warm fit's
    process; frozen (``gc.freeze``), they are left to the OS. What must happen at exit does
    not wait for a collection: the files are closed by their ``with`` blocks, the standard
    streams flushed and the atexit functions run by the interpreter."""
    import gc

    gc.freeze()


def _main(argv: list[str] | None, signals: interrupts.Session) -> int:
    for stream in (sys.stdout, sys.stderr):  # a name from undecodable argv bytes prints as given
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", "") == "strict":
            stream.reconfigure(errors="surrogateescape")
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version, a usage error (its one line is printed)
            return done.code if isinstance(done.code, int) else 0 if done.code is None else 2
    except KeyboardInterrupt:
        signals.done = True
        print(f"{PROG}: interrupted; nothing was written", file=sys.stderr)
        return 130
    return _run(args, signals)


def _run(args: argparse.Namespace, signals: interrupts.Session) -> int:
    """The command, its errors as one line each and their exit codes."""
    try:
        with per_call.call():   # (each input read and parsed once: core/per_call.py)
            A.check_text_files(args)
            _remove_stale_temps()
            return args.func(args)
    except DDTreeBayesError as err:
        signals.done = True     # the exit code is decided: a signal now changes nothing
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:  # SIGINT or SIGTERM (core/interrupts.py): temp files removed
        signals.done = True     # a second signal while this line prints changes nothing
        print(f"{PROG}: interrupted; " + (f"{signals.saved} was saved whole before it"
                                         if signals.saved else "nothing was written"),
              file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `ddtree-bayes predict | head`: the reader left
        signals.done = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # a path given on the command line that cannot be read or written
        signals.done = True
        name = err.filename2 or err.filename  # a rename: the destination is the user's path
        if not name:   # no path with it: most often the output itself (`> /dev/full`)
            print(f"{PROG}: error: {err.strerror or err}, with no file named (most likely "
                  "standard output) (fix: check where standard output goes and its free space)",
                  file=sys.stderr)
            return 2
        full = err.errno in FULL_ERRNOS   # the disk, a quota, a size limit
        print(f"{PROG}: error: {name}: {err.strerror or err} (fix: " + (
              "free space where it is written and re-run; nothing was written" if full else
              "check the path and its permissions") + ")", file=sys.stderr)
        return 2
    except Exception as err:  # a bug: one line, the traceback only when asked for
        signals.done = True
        if os.environ.get("DDTREE_BAYES_TRACEBACK"):
            raise
        print(f"{PROG}: internal error: {type(err).__name__}: {A.one_line(str(err))} (fix: "
              "this is a bug; rerun with DDTREE_BAYES_TRACEBACK=1 and report the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

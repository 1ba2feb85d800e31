"""Time `ddtree-bayes report` (whole process) on a default fit of the bundled data.

Run: .venv/bin/python bench/bench_report.py [--runs 3]. Makes a fit in a scratch dir first
(untimed), then times `ddtree-bayes report --quiet` --runs times. Results:
bench/results/report.json and .md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="timed report runs (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=C.RESULTS_DIR / "report.json")
    args = ap.parse_args()
    cli = str(C.cli_path())
    work = Path(tempfile.mkdtemp(prefix="ddtree-bench-report-"))
    load_start = C.loadavg()
    try:
        fit = C.run_timed([cli, "fit", "--quiet"], cwd=work)
        if fit["returncode"] != 0:
            print(C.tail(fit["stderr"]), file=sys.stderr)
            return 1
        runs = []
        for i in range(args.runs):
            r = C.run_timed([cli, "report", "--quiet"], cwd=work)
            print(f"[report {i + 1}] {r['command']}: wall {r['wall_s']:.2f} s, exit {r['returncode']}")
            runs.append(r)
        ok = [r for r in runs if r["returncode"] == 0]
        stats = C.summary([r["wall_s"] for r in ok])
        table = C.markdown_table(["command", "runs ok", "median (s)", "min (s)", "max (s)"],
                                 [["`ddtree-bayes report --quiet`", f"{len(ok)}/{len(runs)}",
                                   C.fmt_s(stats["median"]), C.fmt_s(stats["min"]),
                                   C.fmt_s(stats["max"])]])
        print(table)
        payload = {"date": C.now_iso(), "machine": C.machine_info(), "load_start": load_start,
                   "load_end": C.loadavg(), "summary": stats,
                   "runs": [{k: r[k] for k in ("command", "returncode", "wall_s")} for r in runs]}
        C.write_json(args.out, payload)
        args.out.with_suffix(".md").write_text(f"## ddtree-bayes report benchmark, {payload['date']}\n\n"
                                               f"{table}\n")
        return 0 if len(ok) == len(runs) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

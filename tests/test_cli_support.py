"""Shared helpers of the CLI tests (test_cli_*.py, test_json_schemas.py, test_from_bench.py):
a working directory holding a point-mass fit on disk, so a command runs in milliseconds and
its numbers can be computed by hand, and a runner that captures exit code, stdout, stderr.

The point mass is ddtree_bayes.engine.testing's (B300 x8 only; linear MoE; SGLang overhead
0.2, native reduction 0.5, no noise): the default scenario at acceptance 12 answers
12 / 20 ms = 600 tok/s in SGLang. The working directory's data file holds the two bundled
B300 rows, which is what the artifact says it was fit on.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

from ddtree_bayes.core.paths import bundled

B300_ROWS = 2  # the bundled file's B300 rows (AR and DDTree budget 8)
#: What predict warns of the default question (DDTree budget 32, M = 33) asked of a fit of the
#: bundled B300 rows (budget 8, M = 9, the most tokens a step there verified): its step's
#: growth past them is the roofline's (engine/structure.py ``beyond_measured_note``).
BEYOND_M33 = ("at C = 1 a step verifies 33 tokens (C x M), more than any measured on b300x8 "
              "(at most 9): there the step's growth with M is the roofline's (compute knee, "
              "and for an MoE the distinct experts read): partly prior-driven")


def copy_bundled_data(root: Path, writable: bool = False) -> Path:
    """``root/data`` with copies of the bundled measurements, hardware and seed tables; with
    ``writable`` the measurement file is made writable (the bundled files are read-only, and
    so are their copies). Returns ``root``."""
    (root / "data").mkdir(parents=True)
    for name in ("measurements.csv", "hardware.csv", "seed_estimates.csv"):
        shutil.copy(bundled(name), root / "data" / name)
    if writable:
        (root / "data" / "measurements.csv").chmod(0o644)
    return root


def run_cli(workdir: Path, *argv: str) -> tuple[int, str, str]:
    """``cli.main(argv)`` in ``workdir``: (exit code, stdout, stderr). An argparse exit
    (SystemExit) becomes its code, as the console script would return it."""
    from ddtree_bayes.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(argv))
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None
                                                                       else 1)
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


FIT_ID = "20260101T000000Z-pointmss"


def write_point_mass_fit(models: Path, data: Path, priors: Path, hardware: Path,
                         fit_id: str = FIT_ID, n: int = 16, moe_form: str = "linear",
                         jitter: float = 0.0, draws=None, seed: int = 20261130,
                         target_model: str = "kimi-k2.6", **overrides) -> Path:
    """Save the point-mass posterior (``overrides`` as in ``point_mass_draws``) as a fit
    artifact that ``store.load_fit`` reads (h5py: root attributes and a ``posterior``
    group of (chain, draw, ...) arrays); ``latest.json`` points at it. ``jitter`` > 0
    multiplies every draw by exp(jitter * N(0, 1)) (seeded), so PSIS-LOO has spread to
    work with. ``target_model``: the one model of ``data``'s rows (a fit of one model)."""
    import h5py
    import numpy as np

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.testing import point_mass_draws

    pm = draws if draws is not None else point_mass_draws(n=n, moe_form=moe_form, **overrides)
    texts = {"data": data.read_text(), "priors": priors.read_text(),
             "hardware": hardware.read_text()}
    meta = json.loads(json.dumps(pm.meta))
    meta.update({
        "fit_id": fit_id, "created_utc": "2026-01-01T00:00:00+00:00", "seed": seed,
        "package_version": "test", "libraries": {},
        "sampler": {"chains": 1, "draws": n, "tune": 0, "target_accept": 0.9,
                    "backend": "nutpie"},
        "data": {"path": str(data.resolve()), "rows": B300_ROWS,
                 "sha256": hashlib.sha256(data.read_bytes()).hexdigest()},
        "priors": {"path": str(priors.resolve()),
                   "sha256": hashlib.sha256(priors.read_bytes()).hexdigest()},
        "inputs_sha256": inputs_digest(texts), "diagnostics": {"parameters": [],
                                                               "divergences": 0},
        "timings": {"total_s": 0.0}})
    if not meta["model"].get("target_models"):   # a fit of several models names them
        meta["model"]["target_model"] = target_model
    path = store.fits_dir(models) / f"{fit_id}.nc"
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as fh:
        fh.attrs[store.META_ATTR] = json.dumps(meta)
        fh.attrs[store.DATA_ATTR] = texts["data"]
        fh.attrs[store.PRIORS_ATTR] = texts["priors"]
        fh.attrs[store.HARDWARE_ATTR] = texts["hardware"]
        post = fh.create_group("posterior")
        rng = np.random.default_rng(0)
        for name, arr in pm.variables.items():
            arr = np.asarray(arr) * np.exp(jitter * rng.standard_normal(np.shape(arr)))
            post[name] = arr[None, ...]  # one chain
    (models / store.LATEST).write_text(json.dumps(
        {"fit_id": fit_id, "file": f"fits/{path.name}", "converged": True}))
    return path


def inputs_digest(texts: dict[str, str]) -> str:
    """The ``inputs_sha256`` a fit records of the texts it stores (engine.inference's hash of
    the data, hardware table and priors), computed here as store.load_fit checks it."""
    h = hashlib.sha256()
    for name in ("data", "hardware", "priors"):
        h.update(hashlib.sha256(texts[name].encode()).digest())
    return h.hexdigest()


def fitted_inputs(work: Path) -> str:
    """The ``inputs_sha256`` the latest fit in ``work`` records: what a test returns from a
    patched ``inference.inputs_sha256`` to make ``update`` see its inputs as the fit's."""
    from ddtree_bayes.engine import store

    return str(store.load_meta(store.resolve(work / "models"))["inputs_sha256"])


def make_point_mass_workdir(root: Path, **overrides) -> Path:
    """``root`` with data/ (the bundled B300 rows, hardware and seed tables),
    models/priors.toml and a point-mass fit of those rows (``overrides``: see
    :func:`write_point_mass_fit`)."""
    (root / "data").mkdir(parents=True)
    (root / "models").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv"):
        shutil.copy(bundled(name), root / "data" / name)
    with open(bundled("measurements.csv"), newline="") as fh:
        lines = fh.read().splitlines(keepends=True)
    header, body = lines[0], [ln for ln in lines[1:] if next(csv.reader([ln]))[1] == "b300"]
    assert len(body) == B300_ROWS
    data = root / "data" / "measurements.csv"
    data.write_text(header + "".join(body))
    data.chmod(0o644)
    shutil.copy(bundled("priors.toml"), root / "models" / "priors.toml")
    (root / "models" / "priors.toml").chmod(0o644)
    write_point_mass_fit(root / "models", data, root / "models" / "priors.toml",
                         root / "data" / "hardware.csv", **overrides)
    return root


def make_multi_model_workdir(root: Path, draws) -> Path:
    """``root`` with data/ (the two-model rows of ``engine.testing.MULTI_DATA``, the bundled
    hardware, seed and model tables), models/priors.toml and a point-mass fit ``draws`` of
    those rows (``engine.testing.multi_model_draws``)."""
    from ddtree_bayes.engine.testing import MULTI_DATA

    (root / "data").mkdir(parents=True)
    (root / "models").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(bundled(name), root / "data" / name)
    (root / "data" / "measurements.csv").write_text(MULTI_DATA)
    shutil.copy(bundled("priors.toml"), root / "models" / "priors.toml")
    write_point_mass_fit(root / "models", root / "data" / "measurements.csv",
                         root / "models" / "priors.toml", root / "data" / "hardware.csv",
                         draws=draws)
    return root


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (ns): equal listings
    before and after a command mean it wrote nothing."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def refits_seen(monkeypatch) -> list[dict]:
    """``api.fit`` replaced by a stub that records its keyword arguments and interrupts (the
    command exits 130, nothing written): whether and how `update` would refit, unsampled."""
    from ddtree_bayes import api

    seen: list[dict] = []

    def fake_fit(*args, **kwargs):
        seen.append(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "fit", fake_fit)
    return seen

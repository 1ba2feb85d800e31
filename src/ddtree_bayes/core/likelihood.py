"""Rows -> configurations: the sufficient statistics the likelihood is written on.

Two measurement rows that agree on every column entering the step time or the likelihood's
sd (:data:`CONFIG_COLUMNS`) have the same modelled ``step_ms`` and sd, and differ only by the
known offset ``log(accept_len * 1000)``. With ``z_i = log tok_s_i - log(accept_len_i * 1000)``
the rows of configuration c share ``z_i ~ Normal(-log step_c, sd_c)``, and their joint
log-likelihood depends on the rows only through ``n``, ``zbar`` and ``S2 = sum (z_i - zbar)^2``:

    sum_i log N(z_i | m, s) = -n/2 log(2 pi s^2) - (S2 + n (zbar - m)^2) / (2 s^2)

(exact: expand ``(z_i - m)^2 = (z_i - zbar)^2 + 2 (z_i - zbar)(zbar - m) + (zbar - m)^2`` and
sum; the middle term sums to 0). The model is then built on configurations, so sampling cost
grows with the number of distinct configurations, not rows. Row weights (a validation fold's
held-out rows have weight 0) enter as weighted ``n``, ``zbar``, ``S2``: the same identity holds
for ``sum_i w_i log N(z_i | m, s)``. numpy only, linear in the rows.

Rows with a blank ``accept_len`` (an acceptance inferred per (model, method, block, budget)
group, :mod:`ddtree_bayes.core.acceptance_latent`) get offset ``log 1000`` (``z = log tok_s -
log 1000``), the configuration key also separates them from rows with a known acceptance
(``accept_inferred``), and the model adds their group's ``log accept_latent`` to the
configuration's mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from ddtree_bayes.core.data import COLUMNS, OPTIONAL_COLUMNS, Measurement, config_label

#: The configuration key: every measurement column that enters ``step_ms`` or the
#: likelihood's sd (system = hardware x gpus; overhead group and engine relation = engine and
#: method; verify tokens; context; drafter passes and tree nodes = method, block, budget (and
#: the drafter: its card prices the passes, its acceptance is its own); the
#: roofline's distinct experts = model card and verify tokens; the structured discrepancy's
#: distance = system, verify tokens, passes). Values are compared after parsing (``16`` and
#: ``16.0`` agree; a blank context and ``0`` do not, which is conservative, never wrong).
CONFIG_COLUMNS = ("model", "hardware", "gpus", "engine", "method", "block", "budget",
                  "verify_tokens", "context_tokens", "concurrency", "drafter")
#: Columns in which the rows of one configuration may differ: ``accept_len`` is the known
#: offset, ``tok_s`` the observation, ``source``/``notes`` are not modelled.
ROW_COLUMNS = ("accept_len", "tok_s", "source", "notes")
assert set(CONFIG_COLUMNS) | set(ROW_COLUMNS) == set(COLUMNS + OPTIONAL_COLUMNS), \
    "classify every new column"


#: The configuration a row belongs to, as a tuple (see :data:`CONFIG_COLUMNS`), and whether its
#: acceptance is inferred (blank accept_len): such rows have a latent offset, the others data.
config_key: Callable[[Measurement], tuple] = attrgetter(*CONFIG_COLUMNS, "accept_inferred")


#: How far apart two runs of one configuration may be (ratio of their tok/s per accepted
#: token) before fit and add call them a likely slip: run-to-run scatter is a few percent (the
#: bundled repeats fit noise_sd 0.026), so a factor 2 is a unit or entry error (per-user tok/s
#: typed as the total, a second run of another context), which a fit would read as the scatter
#: of every configuration (a 58 and a 2000 tok/s run took noise_sd to 0.49).
REPEAT_SPREAD = 2.0


def run_rate(m: Measurement) -> float:
    """``m``'s tok/s per accepted token (steps x streams per second): what the runs of one
    configuration share when their accept_len differs (tok/s itself without one)."""
    return m.tok_s / (m.accept_len or 1.0)


def far_apart_repeats(rows: Sequence[Measurement]) -> list[str]:
    """One line per configuration (:data:`config_key`) whose slowest and fastest runs are more
    than :data:`REPEAT_SPREAD` apart (:func:`run_rate`), naming both rows: what ``fit`` warns of.

    >>> def row(n, tok):
    ...     return Measurement(n, "m", "mi210", 2, "vllm", "ar", None, None, 1, 1.0, None, tok,
    ...                        "s", "")
    >>> far_apart_repeats([row(2, 58.0), row(3, 60.0), row(4, 2000.0)])   # doctest: +ELLIPSIS
    ['rows 2 and 4 repeat one configuration (m, mi210x2 vllm ar M=1) 34.5x apart: 58 and 2000 ...']
    >>> far_apart_repeats([row(2, 58.0), row(3, 110.0)])
    []
    """
    groups: dict[tuple, list[Measurement]] = {}
    for m in rows:
        groups.setdefault(config_key(m), []).append(m)
    lines = []
    for runs in groups.values():
        slow, fast = min(runs, key=run_rate), max(runs, key=run_rate)
        if run_rate(fast) <= REPEAT_SPREAD * run_rate(slow):
            continue
        first, last = sorted((slow, fast), key=lambda m: m.row)
        # (at one accept_len the rows' own tok/s, the same ratio: 303 and 1000 tok/s at 4.4
        # were said as "68.86 and 227.3 tok/s", their tok/s per accepted token)
        same_accept = first.accept_len == last.accept_len
        per = "tok/s" if same_accept else "tok/s per accepted token"
        rate = (lambda m: m.tok_s) if same_accept else run_rate
        lines.append(
            f"rows {first.row} and {last.row} repeat one configuration ({first.model}, "
            f"{config_label(first.system, first.engine, first.method, first.verify_tokens,
                            first.context_tokens, first.concurrency)}) "
            f"{run_rate(fast) / run_rate(slow):.3g}x apart: {rate(first):.4g} and "
            f"{rate(last):.4g} {per}; repeats that far apart are almost always a unit or "
            "entry error, which a fit reads as the scatter of every configuration (check "
            "tok_s: per-user or total? and the configuration columns)")
    return lines


def group_rows(rows: Sequence[Measurement]) -> tuple[np.ndarray, np.ndarray]:
    """(row -> configuration index, position of each configuration's first row), configurations
    numbered in order of their first row. One dict lookup per row.

    >>> from ddtree_bayes.core.data import Measurement
    >>> def row(n, ctx, tok):
    ...     return Measurement(n, "m", "b300", 8, "sglang", "ar", None, None, 1, 1.0, ctx, tok,
    ...                        "s", "")
    >>> idx, first = group_rows([row(2, None, 133), row(3, 0.0, 130), row(4, None, 131)])
    >>> idx.tolist(), first.tolist()
    ([0, 1, 0], [0, 1])
    """
    index: dict[tuple, int] = {}
    first: list[int] = []
    codes = []
    for i, key in enumerate(map(config_key, rows)):
        c = index.setdefault(key, len(first))
        if c == len(first):
            first.append(i)
        codes.append(c)
    return np.array(codes, dtype=np.int64), np.array(first, dtype=np.int64)


def rows_of(row_config: np.ndarray, n_configs: int) -> list[np.ndarray]:
    """Per configuration, the positions of its rows (in file order); one sort.

    >>> [a.tolist() for a in rows_of(np.array([0, 1, 0, 2, 1]), 3)]
    [[0, 2], [1, 4], [3]]
    """
    order = np.argsort(row_config, kind="stable")
    bounds = np.cumsum(np.bincount(row_config, minlength=n_configs))
    return np.split(order, bounds[:-1])


def offsets(rows: Sequence[Measurement]) -> np.ndarray:
    """Each row's known offset ``log(accept_len * 1000 * concurrency)`` (tokens per step of
    the C streams, per second: a row at C > 1 measures their total); ``accept_len`` 1 for a
    row whose acceptance is inferred (the model adds its latent value)."""
    return np.log(np.fromiter(((1.0 if r.accept_len is None else r.accept_len) * r.concurrency
                               for r in rows), float, len(rows)) * 1000.0)


def sufficient_stats(row_config: np.ndarray, z: np.ndarray, n_configs: int,
                     weights: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per configuration: (n, zbar, S2) of ``z`` (weighted by ``weights``; a configuration
    with no weight left has n = 0, zbar = 0, S2 = 0 and contributes nothing).

    >>> n, zbar, s2 = sufficient_stats(np.array([0, 1, 1, 1]), np.array([5.0, 1.0, 2.0, 3.0]), 3)
    >>> n.tolist(), zbar.tolist(), s2.tolist()
    ([1.0, 3.0, 0.0], [5.0, 2.0, 0.0], [0.0, 2.0, 0.0])
    >>> sufficient_stats(np.array([0, 1, 1, 1]), np.array([5.0, 1.0, 2.0, 3.0]), 3,
    ...                  np.array([0.0, 1.0, 0.0, 1.0]))[1].tolist()
    [0.0, 2.0, 0.0]
    """
    w = np.ones(len(z)) if weights is None else np.asarray(weights, dtype=float)
    z = np.asarray(z, dtype=float)
    n = np.bincount(row_config, weights=w, minlength=n_configs).astype(float)
    total = np.bincount(row_config, weights=w * z, minlength=n_configs)
    zbar = np.divide(total, n, out=np.zeros(n_configs), where=n > 0)
    s2 = np.bincount(row_config, weights=w * (z - zbar[row_config]) ** 2, minlength=n_configs)
    return n, zbar, s2


def normal_logp(mean, sd, n, zbar, s2, log=math.log):
    """``sum_i log Normal(z_i | mean, sd)`` from the rows' (n, zbar, S2); works on numpy
    arrays and PyTensor tensors alike (``log`` = ``np.log`` / ``pt.log``).

    >>> z = np.array([0.1, 0.4, -0.2])
    >>> from statistics import NormalDist
    >>> direct = sum(math.log(NormalDist(0.05, 0.3).pdf(x)) for x in z)
    >>> n, zbar, s2 = sufficient_stats(np.zeros(3, dtype=int), z, 1)
    >>> round(float(normal_logp(0.05, 0.3, n, zbar, s2, np.log)[0] - direct), 12)
    0.0
    """
    return (-n * (0.5 * math.log(2 * math.pi) + log(sd))
            - (s2 + n * (zbar - mean) ** 2) / (2.0 * sd ** 2))


#: In a model of data with repeated runs, one run's scatter ``noise_sd`` splits into a
#: configuration's own error ``config_sd`` (shared by its runs) and the run-to-run noise
#: ``run_sd``: ``config_sd = noise_sd sqrt(config_share)``, ``run_sd = noise_sd
#: sqrt(1 - config_share)`` (engine/model.py; :func:`grouped_logp`). ``noise_sd`` keeps its
#: meaning and prior with or without repeats, so a first repeat adds only ``config_share``.
CONFIG_SD = "config_sd"
RUN_SD = "run_sd"
CONFIG_SHARE = "config_share"


def scatter_parts(variables: dict) -> tuple[np.ndarray, np.ndarray | float]:
    """(run-to-run sd, a configuration's own error sd) of one run's log tok/s, per draw, from a
    fit's posterior variables: ``run_sd`` and ``config_sd`` with repeated runs; without, all of
    ``noise_sd`` and 0. (An artifact of an earlier version with repeated runs has
    ``config_sd`` and ``noise_sd`` as the run-to-run part, and reads the same way.)

    >>> scatter_parts({"noise_sd": np.array([0.05]), "run_sd": np.array([0.03]),
    ...                "config_sd": np.array([0.04])})
    (array([0.03]), array([0.04]))
    >>> scatter_parts({"noise_sd": np.array([0.05])})
    (array([0.05]), 0.0)
    """
    if RUN_SD in variables:
        return variables[RUN_SD], variables[CONFIG_SD]
    return variables["noise_sd"], variables.get(CONFIG_SD, 0.0)


#: The resolution (an sd, in log units) at which a configuration's runs' scatter about their
#: mean can be read from the records: tok/s written to 3 or 4 significant digits (565, 91.5,
#: 125.0) is rounded by 0.003%-0.3% of itself (the unit in the last digit over sqrt 12: 0.05%
#: for a 565 written as an integer), so runs that agree to the last digit show no scatter
#: below about 0.1%. :func:`within_s2` reads a configuration's ``S2`` as at least ``(n - 1)
#: RESOLUTION^2``: eight runs recorded at one value (``S2 = 0``) otherwise made ``-(n - 1) log
#: run_sd`` grow without bound as run_sd -> 0, which from n = 5 outgrows config_share's
#: Beta(2, 2) prior (an improper posterior; docs/model.md, "Repeated runs").
RESOLUTION = 0.001


def within_s2(n, s2):
    """A configuration's runs' scatter about their mean ``S2``, read no finer than the records'
    resolution: ``max(S2, (n - 1) RESOLUTION^2)``. A singleton (n = 1), a configuration whose
    rows are held out (n = 0) and runs that differ by more than the resolution (every ``S2``
    above ``(n - 1) 1e-6``: two runs 0.15% apart) keep their ``S2``. numpy arrays and PyTensor
    tensors alike (``n`` and ``S2`` are data: ``max`` written with ``abs``).

    >>> within_s2(np.array([0.0, 1.0, 8.0, 2.0]), np.array([0.0, 0.0, 0.0, 0.5])).tolist()
    [0.0, 0.0, 7e-06, 0.5]
    """
    floor = (n - 1.0) * RESOLUTION ** 2
    return (s2 + floor + abs(s2 - floor)) / 2.0


def grouped_logp(mean, run_sd, between_sd, n, zbar, s2, log=math.log):
    """The joint log-density of a configuration's rows when they share an error of their own:
    ``z_i = mean + e + eps_i`` with ``e ~ Normal(0, between_sd)`` (how far the configuration's
    true mean sits from the model) and ``eps_i ~ Normal(0, run_sd)`` (run-to-run scatter),
    ``e`` integrated out. From (n, zbar, S2) alone:

    ``-n/2 log 2pi - (n - 1) log run_sd - 1/2 log(run_sd^2 + n between_sd^2)
    - S2 / (2 run_sd^2) - n (zbar - mean)^2 / (2 (run_sd^2 + n between_sd^2))``

    With ``between_sd = 0`` it is :func:`normal_logp` (independent rows); with one row it is
    ``Normal(mean, sqrt(run_sd^2 + between_sd^2))``; a configuration with n = 0 adds 0. So the
    mean of many repeated runs is known to ``between_sd``, not to ``run_sd / sqrt(n)``.
    ``S2`` is read as :func:`within_s2` (no finer than the records' resolution), so the
    density stays bounded as ``run_sd -> 0`` when the runs were recorded at one value.

    >>> z = np.array([0.1, 0.4, -0.2])
    >>> n, zbar, s2 = sufficient_stats(np.zeros(3, dtype=int), z, 1)
    >>> bool(np.isclose(grouped_logp(0.05, 0.3, 0.0, n, zbar, s2, np.log),
    ...                 normal_logp(0.05, 0.3, n, zbar, s2, np.log))[0])
    True
    >>> cov = 0.3 ** 2 * np.eye(3) + 0.2 ** 2            # the same rows, e integrated out
    >>> r = z - 0.05
    >>> direct = -0.5 * (3 * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1]
    ...                  + r @ np.linalg.solve(cov, r))
    >>> round(float(grouped_logp(0.05, 0.3, 0.2, n, zbar, s2, np.log)[0] - direct), 12)
    0.0
    """
    total = run_sd ** 2 + n * between_sd ** 2
    return (-n * 0.5 * math.log(2 * math.pi) - (n - 1) * log(run_sd) - 0.5 * log(total)
            - within_s2(n, s2) / (2.0 * run_sd ** 2) - n * (zbar - mean) ** 2 / (2.0 * total))


#: The prior (a fixed value) of the likelihood's degrees of freedom: with it, a
#: configuration's error is Student-t (heavy tails: one benchmark of another launch, build or
#: thermal state does not drag the whole fit); without it (an earlier priors file or fit),
#: normal. See :func:`config_logp`.
LIKELIHOOD_NU = "likelihood_nu"


def likelihood_nu(variables: dict) -> float | None:
    """The fit's Student-t degrees of freedom (:data:`LIKELIHOOD_NU`, stored as a constant in
    its posterior), or None for a normal likelihood (a fit without it).

    >>> likelihood_nu({"likelihood_nu": np.array([4.0, 4.0])}), likelihood_nu({})
    (4.0, None)
    """
    nu = variables.get(LIKELIHOOD_NU)
    return None if nu is None else float(np.ravel(nu)[0])


def config_logp(mean, run_sd, between_sd, n, zbar, s2, nu: float | None, log=math.log,
                between_var=None):
    """The joint log-density of a configuration's rows from (n, zbar, S2): normal
    (:func:`grouped_logp`) when ``nu`` is None, else with the configuration's mean Student-t.

    The normal density factors into the runs' scatter about their mean (``S2``, run-to-run
    noise only) and their mean ``zbar ~ Normal(mean, v)``, ``v = between_sd^2 + run_sd^2 /
    n``. With ``nu`` the second factor is a Student-t of scale ``sqrt(v)`` and ``nu``
    degrees of freedom: the configuration's deviation from the model (its discrepancy, its
    own error and its runs' mean noise) is a scale mixture of normals, so one configuration
    far off the others is read as an outlier of its own, not as a trend. One row (n = 1) is
    then ``t_nu(z | mean, sqrt(run_sd^2 + between_sd^2))``; a configuration with n = 0 (rows
    held out) adds 0. Works on numpy arrays and PyTensor tensors (``n`` is data).
    ``between_var`` (the t only) gives ``between_sd^2`` directly: the model's is ``(tau d)^2``,
    and the gradient of ``sqrt`` then square at d = 0 is 0 x inf.

    >>> from scipy import stats
    >>> n, zbar, s2 = np.array([1.0]), np.array([0.3]), np.array([0.0])
    >>> got = config_logp(0.1, 0.05, 0.12, n, zbar, s2, 4.0, np.log)[0]
    >>> bool(np.isclose(got, stats.t.logpdf(0.3, 4.0, 0.1, math.hypot(0.05, 0.12))))
    True
    >>> z = np.array([0.1, 0.4, -0.2])
    >>> n, zbar, s2 = sufficient_stats(np.zeros(3, dtype=int), z, 1)
    >>> bool(np.isclose(config_logp(0.05, 0.3, 0.2, n, zbar, s2, 1e9, np.log),
    ...                 grouped_logp(0.05, 0.3, 0.2, n, zbar, s2, np.log))[0])
    True
    >>> config_logp(0.05, 0.3, 0.2, np.zeros(1), np.zeros(1), np.zeros(1), 4.0, np.log).tolist()
    [0.0]
    """
    if nu is None:
        return grouped_logp(mean, run_sd, between_sd, n, zbar, s2, log)
    held = (1.0 - n + abs(n - 1.0)) / 2.0   # 1 for a configuration whose rows are all held
    # out (n = 0), 0 for n >= 1 (weights are whole): 1 - min(n, 1) without a boolean tensor
    n_safe = n + held
    within = (-(n_safe - 1.0) * (0.5 * math.log(2 * math.pi) + log(run_sd))
              - within_s2(n_safe, s2) / (2.0 * run_sd ** 2) - 0.5 * log(n_safe))
    var = (between_sd ** 2 if between_var is None else between_var) + run_sd ** 2 / n_safe
    const = math.lgamma((nu + 1.0) / 2.0) - math.lgamma(nu / 2.0) - 0.5 * math.log(nu * math.pi)
    mean_part = const - 0.5 * log(var) - (nu + 1.0) / 2.0 * log(1.0 + (zbar - mean) ** 2
                                                                / (nu * var))
    return within + (1.0 - held) * mean_part


def row_logp(z, mean, sd, nu: float | None):
    """(numpy) one row's log-density under its configuration's mean ``mean`` and sd ``sd``
    (run-to-run noise and the configuration's error together): normal, or Student-t with
    ``nu`` degrees of freedom (:func:`config_logp` with n = 1).

    >>> from scipy import stats
    >>> float(np.round(row_logp(0.3, 0.1, 0.2, None) - stats.norm.logpdf(0.3, 0.1, 0.2), 12))
    0.0
    >>> float(np.round(row_logp(0.3, 0.1, 0.2, 4.0) - stats.t.logpdf(0.3, 4.0, 0.1, 0.2), 12))
    0.0
    """
    if nu is None:   # (written as it always was: the same digits)
        return -0.5 * ((z - mean) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)
    one = np.ones(np.shape(z))
    return config_logp(mean, sd, 0.0, one, z, 0.0 * one, nu, np.log)


def standard_noise(rng: np.random.Generator, shape, nu: float | None) -> np.ndarray:
    """Draws of a configuration's standardised deviation: standard normal, or Student-t with
    ``nu`` degrees of freedom (the fit's :func:`likelihood_nu`), as the likelihood has it."""
    return rng.standard_normal(shape) if nu is None else rng.standard_t(nu, shape)


def split_noise(rng: np.random.Generator, normal_sd: np.ndarray, t_sd: np.ndarray,
                nu: float) -> np.ndarray:
    """(numpy) draws of ``normal_sd x Normal + t_sd x t_nu``, one per element: a run's
    scatter about its configuration's mean (normal, the likelihood's ``S2`` factor) plus a
    configuration's deviation (Student-t). The normals are drawn first and the t draws only
    where some ``t_sd`` is above 0, so with ``t_sd`` 0 these are ``standard_normal``'s digits
    times ``normal_sd``, and a ``t_sd`` near 0 moves them by near 0, draw by draw.

    >>> sd = np.array([0.5, 0.5])
    >>> got = split_noise(np.random.default_rng(1), sd, np.zeros(2), 4.0)
    >>> bool(np.array_equal(got, 0.5 * np.random.default_rng(1).standard_normal(2)))
    True
    """
    normal_sd, t_sd = np.broadcast_arrays(np.asarray(normal_sd, float), np.asarray(t_sd, float))
    out = normal_sd * rng.standard_normal(normal_sd.shape)
    if np.any(t_sd > 0):
        out = out + t_sd * rng.standard_t(nu, t_sd.shape)
    return out


def split_cdf(x: np.ndarray, normal_sd: np.ndarray, t_sd: np.ndarray, nu: float) -> np.ndarray:
    """(numpy) the CDF at ``x`` of ``normal_sd x Normal + t_sd x t_nu`` (:func:`split_noise`),
    elementwise; at least one of the two sds above 0. Normal or t exactly when the other sd is
    0; else through the t's scale mixture, ``E_W[Phi(x / sqrt(normal_sd^2 + t_sd^2 / W))]``,
    ``W ~ Gamma(nu / 2, rate nu / 2)``, by the trapezoid rule in ``log W`` (an analytic
    integrand decaying at both ends: its error is below 1e-5 for nu from 2.1 to 200).

    >>> from scipy import integrate, special, stats
    >>> got = split_cdf(np.array([0.9]), np.array([1.0]), np.array([0.7]), 4.0)[0]
    >>> want = integrate.quad(lambda t: stats.t.pdf(t, 4.0) * special.ndtr(0.9 - 0.7 * t),
    ...                       -np.inf, np.inf)[0]
    >>> round(float(got), 6) == round(want, 6)
    True
    >>> split_cdf(np.array([1.0, 1.0]), np.array([0.0, 2.0]), np.array([0.5, 0.0]), 4.0).round(5)
    array([0.94194, 0.69146])
    """
    from scipy import special

    x, normal_sd, t_sd = np.broadcast_arrays(np.asarray(x, float), np.asarray(normal_sd, float),
                                             np.asarray(t_sd, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(t_sd > 0, special.stdtr(nu, x / t_sd), special.ndtr(x / normal_sd))
    mixed = (normal_sd > 0) & (t_sd > 0)
    if np.any(mixed):
        k = nu / 2.0   # log W's density: k log k - lgamma(k) + k s - k e^s
        step = min(0.1, 0.5 / math.sqrt(k))
        s = np.arange(-50.0 / k - 1.0, math.log1p(50.0 / k) + 1.0, step)
        weight = step * np.exp(k * math.log(k) - math.lgamma(k) + k * s - k * np.exp(s))
        scale = np.sqrt(normal_sd[mixed, None] ** 2 + t_sd[mixed, None] ** 2 * np.exp(-s))
        out[mixed] = special.ndtr(x[mixed, None] / scale) @ weight
    return out


def config_distance(verify_tokens: float, passes: float, rows_verify, rows_passes) -> float:
    """How far a configuration is from the nearest of some measured ones, in log units:
    ``min_r max(|log(M / M_r)|, |log((1 + passes) / (1 + passes_r))|)`` (0 with none measured).

    >>> round(config_distance(33, 1, [1, 9], [0, 1]), 4)  # budget 32 tree from a budget 8 one
    1.2993
    """
    best = math.inf
    for m, p in zip(rows_verify, rows_passes, strict=True):
        best = min(best, max(abs(math.log(verify_tokens / m)), abs(math.log((1 + passes) / (1 + p)))))
    return 0.0 if best == math.inf else best


def config_distances(system: np.ndarray, verify: np.ndarray, passes: np.ndarray,
                     measured: np.ndarray | None = None) -> np.ndarray:
    """Each configuration's distance (:func:`config_distance`) from the
    nearest *other* (verify tokens, drafter passes) point measured on its system; only
    configurations where ``measured`` is true count (a validation fold's training rows).
    Linear in the configurations times the distinct points of a system."""
    keep = np.ones(len(system), dtype=bool) if measured is None else np.asarray(measured, bool)
    points: dict[int, set[tuple[float, float]]] = {}
    for s, m, p, k in zip(system.tolist(), verify.tolist(), passes.tolist(), keep.tolist(),
                          strict=True):
        if k:
            points.setdefault(s, set()).add((m, p))
    cache: dict[tuple[int, float, float], float] = {}
    out = np.zeros(len(system))
    for c, (s, m, p) in enumerate(zip(system.tolist(), verify.tolist(), passes.tolist(),
                                      strict=True)):
        key = (s, m, p)
        if key not in cache:
            others = [q for q in points.get(s, ()) if q != (m, p)]
            cache[key] = config_distance(m, p, [q[0] for q in others], [q[1] for q in others])
        out[c] = cache[key]
    return out


@dataclass(frozen=True)
class ConfigTable:
    """What the model is built from: one entry per distinct configuration.

    Index arrays point into the spec's ``systems``, ``groups`` (``len(groups)`` for
    autoregressive) and ``relations`` (``len(relations)`` for none). ``n``, ``zbar``, ``s2`` are
    the sufficient statistics of ``z = log tok_s - log(accept_len * 1000)`` over its rows.
    """

    first_row: np.ndarray       # position in the measurement list of its first row
    system: np.ndarray
    group: np.ndarray
    relation: np.ndarray
    verify_tokens: np.ndarray
    context_units: np.ndarray
    passes: np.ndarray          # sequential drafter passes (structured form)
    nodes: np.ndarray           # paid tree nodes of the step (C x per stream; structured form)
    distance: np.ndarray        # from the nearest other measured configuration on its system
    n: np.ndarray
    zbar: np.ndarray
    s2: np.ndarray
    distinct: np.ndarray | None = None   # distinct-expert ratio (roofline form), at C x M
    concurrency: np.ndarray | None = None   # streams decoded together (None: all 1)

    def __len__(self) -> int:
        return len(self.first_row)

    @property
    def streams(self) -> np.ndarray:
        """Each configuration's concurrency C (ones when the data have none above 1)."""
        return np.ones(len(self)) if self.concurrency is None else self.concurrency

    @property
    def batch_tokens(self) -> np.ndarray:
        """Tokens one step verifies for all its streams: C x M."""
        return self.verify_tokens * self.streams

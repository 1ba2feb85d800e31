"""Figures of the report, drawn from the computed summary (and, for the sampling plots,
the posterior itself). The only module that imports matplotlib and arviz-plots."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ddtree_bayes.core.data import accept_shown, row_config_label  # noqa: E402
from ddtree_bayes.workflows.report.priors import (  # noqa: E402
    accept_groups_of,
    fit_priors,
    flop_ms_of,
    prior_draws,
    repeated_of,
    scalar_columns,
    varies_of,
)
from ddtree_bayes.workflows.report.summary import PARETO_K_LIMIT  # noqa: E402

BLUE, GREY, RED, ORANGE = "#2b6cb0", "#9aa0a6", "#c53030", "#dd6b20"


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


#: Sampling plots: one titled panel per parameter, this many per figure, in NCOL columns,
#: so that every title and tick label stays legible at the page's width (~1000 px).
PANELS_PER_FIGURE, NCOL = 12, 3
CHAIN_COLORS = (BLUE, ORANGE, "#38a169", "#805ad5", "#d53f8c", "#718096")


def chain_columns(dt) -> dict[str, np.ndarray]:
    """Every scalar of the posterior as a (chain, draw) array, labelled as the diagnostics
    table labels it (``name[coordinate]``); constants (point priors) are left out."""
    post = dt["posterior"].to_dataset()
    out: dict[str, np.ndarray] = {}
    for name in post.data_vars:
        da = post[name]
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        arr = np.asarray(da.transpose("chain", "draw", *extra).values, dtype=float)
        flat = arr.reshape(arr.shape[0], arr.shape[1], -1)
        labels = [name] if not extra else [f"{name}[{x}]" for x in da[extra[0]].values]
        if len(labels) != flat.shape[2]:
            labels = [f"{name}[{j}]" for j in range(flat.shape[2])]
        for j, label in enumerate(labels):
            if np.ptp(flat[:, :, j]) > 0:
                out[label] = flat[:, :, j]
    return out


def _panel_title(ax, label: str, diag: dict | None) -> None:
    sub = "" if diag is None else (f"R-hat {diag['rhat']:.3f}, bulk ESS "
                                   f"{diag['ess_bulk']:.0f}")
    ax.set_title(f"{label}\n{sub}" if sub else label, fontsize=9, loc="left")


def _paneled(summary, dt, path: Path, draw_panel, suptitle: str) -> list[Path]:
    """One panel per parameter, PANELS_PER_FIGURE to a figure: path, path-2, path-3, ..."""
    columns = chain_columns(dt)
    diags = {p["parameter"]: p for p in summary.get("sampling", {}).get("parameters", [])}
    names = list(columns)
    chunks = [names[i:i + PANELS_PER_FIGURE] for i in range(0, len(names), PANELS_PER_FIGURE)]
    paths = []
    for k, chunk in enumerate(chunks, start=1):
        nrow = -(-len(chunk) // NCOL)
        fig, axes = plt.subplots(nrow, NCOL, figsize=(11, 2.3 * nrow + 0.6), squeeze=False,
                                 layout="constrained")
        for ax, name in zip(axes.flat, chunk, strict=False):
            draw_panel(ax, columns[name])
            _panel_title(ax, name, diags.get(name))
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(chunk):]:
            ax.axis("off")
        chains = columns[chunk[0]].shape[0]
        fig.suptitle(f"{suptitle} ({k} of {len(chunks)})", fontsize=10)
        fig.legend(handles=[plt.Line2D([], [], color=CHAIN_COLORS[c % len(CHAIN_COLORS)],
                                       label=f"chain {c + 1}") for c in range(chains)],
                   loc="outside lower center", ncols=chains, fontsize=8, frameon=False)
        out = path if k == 1 else path.with_name(f"{path.stem}-{k}{path.suffix}")
        fig.savefig(out, dpi=90)
        plt.close(fig)
        paths.append(out)
    return paths


def _rank_panel(ax, x: np.ndarray, bins: int = 20) -> None:
    """Per-chain histograms of the pooled ranks, with the uniform count and its 99% band."""
    chains, n = x.shape
    ranks = np.argsort(np.argsort(x, axis=None)).reshape(x.shape)
    edges = np.linspace(0, chains * n, bins + 1)
    expected = n / bins
    half = 2.576 * np.sqrt(expected * (1 - 1 / bins))
    ax.axhspan(expected - half, expected + half, color=GREY, alpha=0.25, lw=0)
    ax.axhline(expected, color=GREY, lw=1)
    centers = (edges[:-1] + edges[1:]) / 2
    for c in range(chains):
        counts = np.histogram(ranks[c], bins=edges)[0]
        ax.step(centers, counts, where="mid", color=CHAIN_COLORS[c % len(CHAIN_COLORS)], lw=1.2)
    ax.set_xticks([])
    ax.set_ylim(0, max(expected + 2 * half, ax.get_ylim()[1]))


def _trace_panel(ax, x: np.ndarray) -> None:
    for c in range(x.shape[0]):
        ax.plot(x[c], color=CHAIN_COLORS[c % len(CHAIN_COLORS)], lw=0.4, alpha=0.8)
    ax.set_xlim(0, x.shape[1] - 1)
    ax.locator_params(axis="y", nbins=4)


def rank(summary, draws, dt, path: Path) -> list[Path]:
    return _paneled(summary, dt, path, _rank_panel,
                    "Rank plots: counts of each chain's ranks in 20 bins; flat within the grey "
                    "99% band when the chains agree")


def trace(summary, draws, dt, path: Path) -> list[Path]:
    return _paneled(summary, dt, path, _trace_panel, "Traces: draws in order, one line per chain")


def prior_posterior(summary, draws, dt, path: Path) -> None:
    meta = draws.meta
    priors = fit_priors(draws)   # (as the summary's prior_posterior table draws them)
    prior = scalar_columns(prior_draws(priors, meta["coords"], draws.n_draws, summary["seed"],
                                       flop_ms_of(meta), varies_of(meta),
                                       accept_groups_of(meta), repeated_of(meta),
                                       meta["model"]),
                           meta["coords"])
    post = scalar_columns(draws.variables, meta["coords"])
    rows = summary["prior_posterior"]
    ncol = 4
    nrow = -(-len(rows) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(13, 2.2 * nrow))
    for ax, r in zip(axes.flat, rows, strict=False):
        name = r["parameter"]
        lo, hi = np.quantile(np.concatenate([prior[name], post[name]]), [0.005, 0.995])
        bins = np.linspace(lo, hi, 50)
        ax.hist(prior[name], bins=bins, density=True, color=GREY, alpha=0.6, label="prior")
        ax.hist(post[name], bins=bins, density=True, color=BLUE, alpha=0.7, label="posterior")
        ax.set_title(f"{name}\nsd ratio {r['sd_ratio']:.2f} ({r['status']})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_yticks([])
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    _save(fig, path)


def ppc(summary, draws, dt, path: Path) -> None:
    rows = summary["ppc"]["rows"]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows, strict=True):
        ax.plot([r["lo90"], r["hi90"]], [yi, yi], color=BLUE, lw=1.5, alpha=0.5)
        ax.plot([r["lo50"], r["hi50"]], [yi, yi], color=BLUE, lw=5)
        ax.plot(r["measured"], yi, "o", color=RED if r["outside_90"] else "black", ms=6)
    ax.set_yticks(y, [f"row {r['row']}: {row_config_label(r)}" for r in rows],
                  fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("tok/s (log scale)")
    _save(fig, path)


def loo(summary, draws, dt, path: Path) -> None:
    k = summary["loo"]["pareto_k"]
    pit = np.sort(np.asarray(summary["loo"]["loo_pit"]))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.5))
    a1.scatter(range(len(k)), [x["k"] for x in k],
               c=[RED if x["flag"] else BLUE for x in k])
    a1.axhline(summary["loo"].get("pareto_k_threshold", PARETO_K_LIMIT), ls="--", color=GREY)
    a1.set_xticks(range(len(k)), [str(x["row"]) for x in k])
    a1.set_xlabel("measurement row")
    a1.set_ylabel("Pareto k")
    n = len(pit)
    ecdf = np.arange(1, n + 1) / n
    a2.step(pit, ecdf, where="post", color=BLUE, label="LOO-PIT ECDF")
    a2.plot([0, 1], [0, 1], color=GREY, ls="--", label="uniform")
    band = 1.36 / np.sqrt(n)  # 95% Kolmogorov-Smirnov band
    a2.fill_between([0, 1], [-band, 1 - band], [band, 1 + band], color=GREY, alpha=0.2)
    a2.set_xlim(0, 1)
    a2.set_ylim(0, 1)
    a2.legend(fontsize=8)
    a2.set_xlabel("LOO-PIT")
    _save(fig, path)


def psense(summary, draws, dt, path: Path) -> None:
    items = sorted(summary["psense"]["headline_by_prior"].items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(items) + 1.2))
    ax.barh([k for k, _ in items], [v for _, v in items], color=ORANGE)
    ax.axvline(0.05, ls="--", color=GREY)
    ax.set_xlabel("power-scaling sensitivity (0.05 = noticeable)")
    ax.tick_params(labelsize=8)
    _save(fig, path)


def fan(summary, draws, dt, path: Path) -> None:
    f = summary["fan"]
    accept = np.asarray(f["accept"])
    fig, ax = plt.subplots(figsize=(10, 5.5))
    colors = {0: BLUE, 1: ORANGE}
    for i, (eng, e) in enumerate(f["engines"].items()):
        q = np.asarray(e["quantiles"])
        c = colors.get(i, GREY)
        ax.fill_between(accept, q[:, 0], q[:, 4], color=c, alpha=0.15)
        ax.fill_between(accept, q[:, 1], q[:, 3], color=c, alpha=0.35)
        ax.plot(accept, q[:, 2], color=c, label=f"{eng}: posterior median, 50% and 90%")
        if e["original"]:
            orig = np.asarray(e["original"])
            ax.plot(accept, orig, ls="--", color=c, lw=1, label=f"{eng}: original estimate")
            ax.fill_between(accept, orig * 0.7, orig * 1.3, color=c, alpha=0.06, hatch="//")
            pts = e["original_points"]
            ax.plot([p["accept"] for p in pts], [p["tok_s"] for p in pts], "s", color=c, mfc="white")
    for m in f["measured"]:
        ax.plot(m["accept"], m["tok_s"], "o", color="black")
        ax.annotate(f"measured {m['label']}", (m["accept"], m["tok_s"]), fontsize=7,
                    xytext=(4, -10), textcoords="offset points")
    if f.get("accept_clipped"):   # the grid stops at what a step can emit
        ax.axvline(f["accept_max"], ls=":", color=GREY,
                   label=f"at most {f['accept_max']:g} tokens per step ({f['accept_max_rule']})")
    ax.set_xlabel("acceptance length (tokens per step)")
    ax.set_ylabel("tok/s")
    ax.set_title(next(iter(f["engines"].values()))["scenario"].split(",", 1)[0]
                 + ": default scenario, posterior vs the original +-30%", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    _save(fig, path)


def concurrency(summary, draws, dt, path: Path) -> None:
    f = summary["concurrency"]
    c = np.asarray(f["concurrency"], dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = [GREY, BLUE, ORANGE]
    for i, (name, e) in enumerate(f["engines"].items()):
        color = colors[i] if i < len(colors) else GREY
        label = "AR" if name == "ar" else f"{name} at accept {accept_shown(f['accept'])}"
        for ax, key in zip(axes, ("per_user", "total"), strict=True):
            q = np.asarray(e[key])
            ax.fill_between(c, q[:, 0], q[:, 4], color=color, alpha=0.15)
            ax.plot(c, q[:, 2], "o-", color=color, ms=3, label=label)
    for ax, title in zip(axes, ("tok/s per user (one stream)", "total tok/s (C streams)"),
                         strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency C")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if f["measured_max"] < c[-1]:
            ax.axvspan(f["measured_max"], c[-1], color=GREY, alpha=0.06)
    axes[0].legend(fontsize=8)
    _save(fig, path)


def variance(summary, draws, dt, path: Path) -> None:
    engines = summary["variance"]
    fig, axes = plt.subplots(1, len(engines), figsize=(6 * len(engines), 3.8), squeeze=False)
    for ax, (eng, d) in zip(axes[0], engines.items(), strict=True):
        items = list(d["shares"].items())[::-1]
        ax.barh([k for k, _ in items], [v for _, v in items], color=BLUE)
        ax.set_title(f"{eng}: Var(log tok/s) = {d['var_log_tok_s']:.4f}", fontsize=9)
        ax.set_xlim(0, 1)
        ax.tick_params(labelsize=8)
        ax.set_xlabel("share of Var(log tok/s) (Shapley value of R^2)")
    _save(fig, path)


def breakdown(summary, draws, dt, path: Path) -> None:
    rows = summary["breakdown"]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.5))
    y = np.arange(len(rows))[::-1]
    left = np.zeros(len(rows))
    for key, color in (("moe", BLUE), ("attn_base", GREY), ("context", "#805ad5"),
                       ("spec", ORANGE)):
        vals = np.array([r[key][1] for r in rows])
        ax.barh(y, vals, left=left, color=color, label=key)
        left += vals
    step = np.array([r["step"] for r in rows])
    ax.errorbar(step[:, 1], y, xerr=[step[:, 1] - step[:, 0], step[:, 2] - step[:, 1]],
                fmt="none", color="black", capsize=3)
    for yi, r in zip(y, rows, strict=True):
        if r["measured_step_ms"] is not None:
            ax.plot(r["measured_step_ms"], yi, "D", color=RED, ms=5)
    ax.set_yticks(y, [r["config"] for r in rows], fontsize=8)
    ax.set_xlabel("ms per step")
    ax.legend(fontsize=8, loc="lower right")
    _save(fig, path)


def budgets(summary, draws, dt, path: Path) -> None:
    opt = summary["decisions"]["optimize"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax2 = ax.twinx()
    width = 0.35
    for i, (eng, o) in enumerate(opt.items()):
        b = np.array([r["budget"] for r in o["rows"]])
        x = np.arange(len(b))
        c = (BLUE, ORANGE)[i % 2]
        ax.plot(x, [r["median"] for r in o["rows"]], "o-", color=c, label=f"{eng} median tok/s")
        # the recommended budget is the one of the highest E[tok/s], not of the highest median
        ax.plot(x, [r["tok_s_mean"] for r in o["rows"]], "s--", color=c, ms=4,
                label=f"{eng} E[tok/s] (recommended: budget {o['recommended']})")
        ax.fill_between(x, [r["lo90"] for r in o["rows"]], [r["hi90"] for r in o["rows"]],
                        color=c, alpha=0.15)
        ax2.bar(x + (i - 0.5) * width, [r["p_best"] for r in o["rows"]], width=width, color=c,
                alpha=0.3)
        ax.set_xticks(x, [str(v) for v in b])
    ax.set_xlabel("tree budget (verify tokens = budget + 1)")
    ax.set_ylabel("tok/s")
    ax2.set_ylabel("P(best)")
    ax2.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="upper right")
    _save(fig, path)


def next_(summary, draws, dt, path: Path) -> None:
    nx = summary["decisions"]["next"]
    rows = nx["rows"][::-1]
    fig, ax = plt.subplots(figsize=(10, 0.4 * len(rows) + 1.5))
    ax.barh([r["candidate"] for r in rows], [r["expected_width"] for r in rows],
            xerr=[r["width_se"] for r in rows], color=[GREY if r["unreliable"] else BLUE
                                                      for r in rows])
    ax.axvline(nx["query"]["width"], ls="--", color=RED, label="90% width now")
    ax.set_xlabel(f"expected 90% interval width of: {nx['query']['describe']} (tok/s)")
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=8)
    _save(fig, path)


def hardware(summary, draws, dt, path: Path) -> None:
    rows = [h for h in summary["decisions"]["hardware"] if "ar" in h]
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.4 * len(rows) + 1.5), sharey=True)
    y = np.arange(len(rows))
    asked = summary["decisions"].get("hardware_query")   # (the table's column)
    for ax, key, title in ((axes[0], "ar", "autoregressive"),
                           (axes[1], "ddtree", asked or "DDTree budget 32, accept 14")):
        for yi, h in zip(y, rows, strict=True):
            lo, med, hi = h[key]
            c = "black" if h["measured"] else BLUE
            ax.plot([lo, hi], [yi, yi], color=c, lw=2, alpha=0.6)
            ax.plot(med, yi, "o", color=c)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("tok/s")
        ax.grid(alpha=0.3)
    axes[0].set_yticks(y, [f"{h['hardware']} x{h['gpus']}" for h in rows], fontsize=8)
    _save(fig, path)


FIGURES = {"rank": rank, "trace": trace, "prior_posterior": prior_posterior, "ppc": ppc,
           "loo": loo, "psense": psense, "fan": fan, "concurrency": concurrency,
           "variance": variance,
           "breakdown": breakdown, "budgets": budgets, "next": next_, "hardware": hardware}


def sbc_histograms(result: dict, path: Path) -> None:
    """Rank histograms of a simulation-based calibration run, one panel per parameter,
    with the 99% band of counts under uniformity."""
    from scipy import stats

    tests = result["uniformity"]
    n = result["replicates"]
    bins = result["bins"]
    lo, hi = stats.binom.ppf([0.005, 0.995], n, 1 / bins)
    ncol = 4
    nrow = -(-len(tests) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(12, 2.1 * nrow), squeeze=False)
    for ax, (name, t) in zip(axes.flat, tests.items(), strict=False):
        ax.bar(range(bins), t["counts"], color=BLUE, width=0.9, zorder=2)
        ax.axhspan(lo, hi, color=GREY, alpha=0.3, zorder=0)
        ax.axhline(n / bins, color=GREY, lw=1)
        ax.set_title(f"{name}\nchi2 p = {t['chi2_p']:.2f}", fontsize=8)
        ax.set_xticks([])
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(tests):]:
        ax.axis("off")
    fig.suptitle(f"SBC rank histograms: {n} replicates, ranks of the truth among "
                 f"{result['L']} thinned posterior draws, {bins} bins", fontsize=10)
    _save(fig, path)

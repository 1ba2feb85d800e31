"""Figures of the report, drawn from the computed summary (and, for the sampling plots,
the posterior itself). The only module that imports matplotlib and arviz-plots."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ddtree_bayes.core.config import parse_priors  # noqa: E402
from ddtree_bayes.workflows.report.priors import prior_draws, scalar_columns  # noqa: E402
from ddtree_bayes.workflows.report.summary import PARETO_K_LIMIT  # noqa: E402

BLUE, GREY, RED, ORANGE = "#2b6cb0", "#9aa0a6", "#c53030", "#dd6b20"


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _sampling_vars(dt) -> list[str]:
    return [v for v in dt["posterior"].data_vars]


def rank(summary, draws, dt, path: Path) -> None:
    import arviz_plots as azp

    pc = azp.plot_rank(dt, var_names=_sampling_vars(dt), backend="matplotlib")
    pc.savefig(path, dpi=70)
    plt.close("all")


def trace(summary, draws, dt, path: Path) -> None:
    import arviz_plots as azp

    pc = azp.plot_trace_dist(dt, var_names=_sampling_vars(dt), backend="matplotlib")
    pc.savefig(path, dpi=60)
    plt.close("all")


def prior_posterior(summary, draws, dt, path: Path) -> None:
    meta = draws.meta
    priors = parse_priors(draws.priors_toml)
    prior = scalar_columns(prior_draws(priors, meta["coords"], draws.n_draws,
                                           summary["seed"]), meta["coords"])
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
    ax.set_yticks(y, [f"row {r['row']}: {r['system']} {r['engine']} {r['method']} "
                      f"M={r['verify_tokens']} ctx={r['context_tokens']:g}" for r in rows],
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
    a1.axhline(PARETO_K_LIMIT, ls="--", color=GREY)
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
    ax.set_xlabel("acceptance length (tokens per step)")
    ax.set_ylabel("tok/s")
    ax.set_title(next(iter(f["engines"].values()))["scenario"].split(",", 1)[0]
                 + ": default scenario, posterior vs the original +-30%", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
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
        ax.set_xlabel("share of variance explained alone")
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
        ax.fill_between(x, [r["lo90"] for r in o["rows"]], [r["hi90"] for r in o["rows"]],
                        color=c, alpha=0.15)
        ax2.bar(x + (i - 0.5) * width, [r["p_best"] for r in o["rows"]], width=width, color=c,
                alpha=0.3)
        ax.set_xticks(x, [str(v) for v in b])
    ax.set_xlabel("tree budget (verify tokens = budget + 1)")
    ax.set_ylabel("expected tok/s")
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
    for ax, key, title in ((axes[0], "ar", "autoregressive"),
                           (axes[1], "ddtree", "DDTree budget 32, accept 14")):
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
           "loo": loo, "psense": psense, "fan": fan, "variance": variance,
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

"""Report section for FDP-Fair: fair classification across several data holders (paper 003).

The effect of the number of sites S for a fixed total sample (the paper's Figure 5 design):
repetitions of the registered study ``fdp-figure5`` (its trial function, the runner's seeds,
the package's default threshold rule), with means and 95% intervals over the repetitions.
Only public API is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from dpfair.experiments import get_experiment, rep_seed
from dpfair.report._fairclass import FairclassReportConfig
from dpfair.report._html import FigureBlock, Section, figure_to_data_uri, new_figure, table

__all__ = ["federated_section"]

Progress = Callable[[str, int], None]
_STUDY = "fdp-figure5"


def _mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its Student-t 95% interval (0 for one value)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return float(v.mean()), 0.0
    return float(v.mean()), float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1)
                                  / math.sqrt(v.size))


def _cells(cfg: FairclassReportConfig) -> list[dict[str, Any]]:
    """The report's cells of ``fdp-figure5``: N_total split over S sites, default rule."""
    return [{"S": int(s), "n_s": cfg.federated_n_total // int(s),
             "epsilon": float(cfg.federated_epsilon), "alpha": float(cfg.federated_alpha),
             "variant": "default", "n_test": 2500} for s in cfg.federated_sites]


def _look(summary: Sequence[Mapping[str, Any]], alpha: float, worst_share: float) -> str:
    """What the figure shows, in words, from its own numbers."""
    first, last = summary[0], summary[-1]
    noise = max(first["pop_risk_ci95"], last["pop_risk_ci95"])
    trend = ("grows slightly" if last["pop_risk"] - first["pop_risk"] > noise
             else "changes little")
    under = all(r["pop_abs_dd"] < alpha for r in summary)
    cap = (f"the mean disparity stays below the red cap α = {alpha:g} for every S"
           if under else f"the mean disparity reaches the red cap α = {alpha:g} for some S")
    return (
        f"left, the error {trend} (population risk {first['pop_risk']:.3f} at S = "
        f"{first['S']}, {last['pop_risk']:.3f} at S = {last['S']}) as the same data are split "
        f"over more sites, each adding its own noise; right, {cap} (the population |DD| "
        "exceeded α in "
        f"{worst_share:.0%} of the repetitions at worst)."
    )


def federated_section(
    config: FairclassReportConfig, seed: int, progress: Progress | None = None
) -> Section:
    """Compute and render the FDP-Fair section.

    Parameters
    ----------
    config : FairclassReportConfig
        Its ``federated_*`` settings: the numbers of sites, repetitions, total sample, ε
        and α (no sites: an empty section saying so).
    seed : int
        Root seed; repetition ``r`` of cell ``i`` uses ``rep_seed(seed, i, r)``, as
        ``dpfair reproduce fdp-figure5`` does for its own grid.
    progress : callable, optional
        ``progress(label, units_done_since_last_call)``.

    Returns
    -------
    Section
    """
    tick: Progress = progress or (lambda label, k: None)
    sec = Section("federated", "Fair classification across several data holders (FDP-Fair)")
    sec.paragraph(
        "Several institutions (say hospitals) each hold their own patients' records and "
        "want one fair classifier without pooling the data. In FDP-Fair each site sends "
        "the coordinating centre only two privatised summaries of its own data, signed; "
        "the centre combines them into a classifier with the same disparity cap α as "
        "CDP-Fair. Each site's privacy is its own: every site spends (ε, δ) on its own "
        "records, whatever the others do."
    )
    if not config.federated_sites:
        sec.summary("Not run in this configuration (no numbers of sites were given).")
        return sec
    cells = _cells(config)
    run_one = get_experiment(_STUDY).run_one
    reps = config.federated_reps
    per_s: dict[int, list[Mapping[str, float]]] = {}
    for i, cell in enumerate(cells):
        per_s[cell["S"]] = [run_one(cell, rep_seed(seed, i, r)) for r in range(reps)]
        tick(f"federated: S = {cell['S']}", reps)
    sites = [c["S"] for c in cells]
    alpha = config.federated_alpha
    summary: list[dict[str, Any]] = []
    for s in sites:
        outs = per_s[s]
        row: dict[str, Any] = {"S": s, "reps": len(outs), "n_s": config.federated_n_total // s}
        for key in ("error", "pop_risk", "pop_abs_dd", "abs_dd"):
            m, h = _mean_ci([float(o[key]) for o in outs])
            row[key], row[f"{key}_ci95"] = m, h
        row["share_above_alpha"] = float(np.mean([float(o["pop_abs_dd"]) > alpha
                                                  for o in outs]))
        row["site_epsilon_spent"] = max(float(o["site_epsilon_spent"]) for o in outs)
        summary.append(row)

    fig = new_figure(8.2, 3.4)
    ax_err, ax_dd = fig.subplots(1, 2)
    xs = np.asarray(sites, dtype=float)
    ax_err.errorbar(xs - 0.06, [r["pop_risk"] for r in summary],
                    yerr=[r["pop_risk_ci95"] for r in summary], fmt="o-", capsize=3,
                    label="population risk")
    ax_err.errorbar(xs + 0.06, [r["error"] for r in summary],
                    yerr=[r["error_ci95"] for r in summary], fmt="s--", capsize=3,
                    label="test error")
    top_err = max(r["error"] + r["error_ci95"] for r in summary)
    ax_err.set_ylim(0.0, max(0.5, 1.15 * top_err))
    ax_err.set_ylabel("misclassification rate")
    ax_dd.errorbar(xs - 0.06, [r["pop_abs_dd"] for r in summary],
                   yerr=[r["pop_abs_dd_ci95"] for r in summary], fmt="o-", capsize=3,
                   label="population |DD|")
    ax_dd.errorbar(xs + 0.06, [r["abs_dd"] for r in summary],
                   yerr=[r["abs_dd_ci95"] for r in summary], fmt="s--", capsize=3,
                   label="test |DD|")
    ax_dd.axhline(alpha, color="red", ls="--", lw=1.2, label=f"cap α = {alpha:g}")
    top_dd = max(r["abs_dd"] + r["abs_dd_ci95"] for r in summary)
    ax_dd.set_ylim(0.0, max(1.5 * alpha, 1.1 * top_dd))  # the cap stays in view: 0.01 is small
    ax_dd.set_ylabel("|DD| (disparity)")
    for ax in (ax_err, ax_dd):
        ax.set_xticks(sites)
        ax.set_xlabel("number of sites S (same total data)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    worst_share = max(r["share_above_alpha"] for r in summary)
    n_s = [r["n_s"] for r in summary]
    deltas = ", ".join(f"({config.federated_epsilon:g}, {(n / 2) ** -2:.2g})-DP at S = {s}"
                       for s, n in zip(sites, n_s, strict=True))
    sec.figure(FigureBlock(
        "fig-federated-sites",
        "Figure 12: FDP-Fair — splitting the same data over more sites",
        figure_to_data_uri(fig),
        f"Setting: N_total = {config.federated_n_total} rows of the paper's simulation "
        f"split evenly over S ∈ {{{', '.join(map(str, sites))}}} sites (N_s = "
        f"{', '.join(map(str, n_s))} rows each), α = {alpha:g}, the package's default "
        f"(confidence) threshold rule; {reps} repetitions per S, each with fresh data; "
        "points: means, bars: 95% Student-t intervals of the mean; population quantities "
        "on 200,000 fresh draws of the design, test ones on 2,500. "
        f"Seed {seed} (the trial function and seeds of `dpfair reproduce {_STUDY}` on this "
        "grid). Privacy: each site spends, on its own rows and over both rounds of the "
        f"protocol, (ε, δ) = ({config.federated_epsilon:g}, (N_s/2)⁻²), that is {deltas}; "
        "sites hold disjoint rows, so no site's guarantee depends on the others.",
        look=_look(summary, alpha, worst_share),
    ))
    sec.raw(table(
        ["S", "repetitions", "population risk", "test error", "population |DD|",
         "test |DD|", "share of repetitions with population |DD| > α"],
        [[r["S"], r["reps"], f"{r['pop_risk']:.4f} ± {r['pop_risk_ci95']:.4f}",
          f"{r['error']:.4f} ± {r['error_ci95']:.4f}",
          f"{r['pop_abs_dd']:.4f} ± {r['pop_abs_dd_ci95']:.4f}",
          f"{r['abs_dd']:.4f} ± {r['abs_dd_ci95']:.4f}", f"{r['share_above_alpha']:.2f}"]
         for r in summary],
    ))
    first, last = summary[0], summary[-1]
    sec.summary(
        f"Splitting {config.federated_n_total} records over {first['S']} to {last['S']} "
        f"sites raises the population error from {first['pop_risk']:.3f} to "
        f"{last['pop_risk']:.3f}, while the disparity stays under the cap α = {alpha:g} "
        f"(largest mean population |DD| {max(r['pop_abs_dd'] for r in summary):.3f}); each "
        f"site spends ε = {config.federated_epsilon:g} on its own records."
    )
    sec.results["federated"] = summary
    return sec

"""Report section for paper 004: private confidence intervals for the median.

Only the public API is used: :func:`dpfair.median.confidence_interval`,
:func:`dpfair.median.nonprivate_interval`, :data:`dpfair.median.METHODS`,
:mod:`dpfair.quantiles` (quartiles and the CDF band, issue 22) and :mod:`dpfair.data`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

import dpfair.median
import dpfair.quantiles
from dpfair.data import BUNDLED, get_design, load_bundled
from dpfair.experiments import get_experiment, rep_seed
from dpfair.privacy import zcdp_to_approx_epsilon
from dpfair.report._html import FigureBlock, Section, figure_to_data_uri, new_figure, table

__all__ = ["MedianReportConfig", "median_section"]

Progress = Callable[[str, int], None]

#: The paper's granularities on R = [−5, 15] (paper 004, §5): θ = 0.005 for ExpMech,
#: 0.05 for the tree-based methods (NoisyBinSearch uses the same grid resolution).
PAPER_GRANULARITY: Mapping[str, float] = {
    "expmech": 0.005,
    "cdf": 0.05,
    "binsearch": 0.05,
    "binsearch_cdf": 0.05,
}

_LABEL = {
    "nonprivate": "non-private",
    "expmech": "ExpMech",
    "cdf": "CDFPostProcess",
    "binsearch": "NoisyBinSearch",
    "binsearch_cdf": "BinSearch+CDF",
}
_COLOR = {
    "nonprivate": "#444444",
    "expmech": "#1f77b4",
    "cdf": "#d62728",
    "binsearch": "#2ca02c",
    "binsearch_cdf": "#9467bd",
}
_DELTA = 1e-6  # δ at which captions also give the (ε, δ)-DP equivalent


@dataclass(frozen=True)
class MedianReportConfig:
    """Sizes and settings of the median section.

    The defaults are the paper's setting (log-normal σ = 1, n = 1000, α = 0.05,
    R = [−5, 15], θ as in :data:`PAPER_GRANULARITY`). Use :meth:`quick`, :meth:`full` or
    :meth:`tiny` (tests) for the repetition counts.
    """

    design: str = "lognormal"
    n: int = 1000
    alpha: float = 0.05
    rho: float = 0.5
    bounds: tuple[float, float] = (-5.0, 15.0)
    granularity: Mapping[str, float] = field(default_factory=lambda: dict(PAPER_GRANULARITY))
    rhos: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0)
    width_datasets: int = 50
    width_runs: int = 1
    coverage_designs: tuple[str, ...] = ("lognormal",)
    coverage_datasets: int = 1000
    real_dataset: str = "adult_age"
    real_granularity: float = 0.1
    real_rho: float = 0.5

    @classmethod
    def quick(cls) -> MedianReportConfig:
        """Small repetition counts (the demo): well under a minute on 2 cores."""
        return cls()

    @classmethod
    def full(cls) -> MedianReportConfig:
        """The paper's repetition counts: 100 data sets × 5 runs for widths; for coverage
        its 1000 × 5 = 5000 intervals per cell, each on a fresh data set (so the
        Clopper–Pearson interval is exact), on all five synthetic designs."""
        return cls(
            width_datasets=100,
            width_runs=5,
            coverage_designs=(
                "lognormal",
                "lognormal_sigma5",
                "normal",
                "uniform",
                "skewed_heavy",
            ),
            coverage_datasets=5000,
        )

    @classmethod
    def tiny(cls) -> MedianReportConfig:
        """A few repetitions only: checks that the section builds (unit tests)."""
        return replace(cls(), rhos=(0.5, 1.0), width_datasets=2, coverage_datasets=8)

    def units(self) -> int:
        """Number of interval computations, for progress reporting."""
        m = len(dpfair.median.METHODS)
        return (
            m
            + len(self.rhos) * self.width_datasets * self.width_runs * m
            + len(self.coverage_designs) * self.coverage_datasets * m
            + m
            + 2
        )


# --------------------------------------------------------------------------- helpers
def _privacy_text(results: Sequence[Any]) -> str:
    """What the intervals report as spent: distinct budgets and their (ε, δ) equivalents."""
    seen: dict[str, Any] = {}
    for r in results:
        seen.setdefault(str(r.privacy), r.privacy)
    parts = []
    for text, budget in seen.items():
        extra = ""
        if budget.kind == "zcdp" and budget.rho:
            eps = budget.to_approx(_DELTA).epsilon
            extra = f", which implies ({eps:.3g}, {_DELTA:g})-DP"
        parts.append(f"{text}{extra}")
    return "; ".join(parts)


def _trial_params(
    config: MedianReportConfig, method: str, rho: float, bounds: tuple[float, float]
) -> dict[str, Any]:
    """A cell of the registered median studies for this report's setting."""
    return {
        "method": method,
        "n": config.n,
        "rho": float(rho),
        "sigma": 1.0,
        "alpha": config.alpha,
        "r_low": float(bounds[0]),
        "r_high": float(bounds[1]),
        "theta": float(config.granularity[method]),
    }


def _rho_text(rows: Sequence[Mapping[str, Any]]) -> str:
    rhos = sorted({float(r["rho_spent"]) for r in rows})
    eps = ", ".join(
        f"{rho:g}-zCDP ⇒ ({zcdp_to_approx_epsilon(rho, _DELTA):.3g}, {_DELTA:g})-DP"
        for rho in rhos
    )
    return eps or "none"


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def _interval_figure(
    rows: Sequence[tuple[str, float, float, float]],
    truth: float | None,
    xlabel: str,
) -> Any:
    fig = new_figure(7.5, 0.55 * len(rows) + 1.3)
    ax = fig.add_subplot()
    for i, (key, low, high, est) in enumerate(rows):
        y = len(rows) - 1 - i
        ax.plot([low, high], [y, y], color=_COLOR[key], lw=4, solid_capstyle="butt")
        ax.plot([low, high], [y, y], "|", color=_COLOR[key], ms=14, mew=2)
        ax.plot([est], [y], "o", color="white", mec=_COLOR[key], ms=6)
    ax.set_yticks(range(len(rows)), [_LABEL[k] for k, *_ in rows][::-1])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    if truth is not None:
        ax.axvline(truth, color="black", ls="--", lw=1, label=f"population median {truth:g}")
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, frameon=False)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    return fig


# --------------------------------------------------------------------------- the section
def _every_method_interval(
    x: Any,
    methods: Sequence[str],
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    granularity: Mapping[str, float],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``{method: its ρ-zCDP interval}`` on ``x``, the methods drawing from ``rng`` in order.

    Each interval is a separate ρ-zCDP release on the same data; ``granularity[method]``
    is that method's θ.
    """
    return {
        m: dpfair.median.confidence_interval(
            x,
            rho=rho,
            bounds=bounds,
            alpha=alpha,
            method=m,
            granularity=granularity[m],
            rng=rng,
        )
        for m in methods
    }


def median_section(
    config: MedianReportConfig,
    seed: int,
    progress: Progress | None = None,
) -> Section:
    """Compute and render the median section.

    Parameters
    ----------
    config : MedianReportConfig
        Sizes and settings.
    seed : int
        Root seed; the four parts use independent streams spawned from
        ``numpy.random.SeedSequence(seed)``.
    progress : callable, optional
        ``progress(label, units_done_since_last_call)``.
    """
    tick: Progress = progress or (lambda label, k: None)
    methods = tuple(dpfair.median.METHODS)
    streams = np.random.SeedSequence(seed).spawn(5)  # the first four as before issue 22
    sec = Section("median", "Private confidence intervals for the median")
    sec.paragraph(
        "A statistician wants a confidence interval for the median of a column (an age, an "
        "income) without revealing any one person's value. Each of the four methods of "
        "Drechsler et al. returns an interval [low, high] that contains the population "
        f"median with probability at least {1 - config.alpha:g} for every continuous "
        "population whose median lies in a public range R chosen beforehand, and spends "
        "exactly the stated ρ of zero-concentrated differential privacy (ρ-zCDP; one "
        "record replaced at a time, n public). The classical non-private interval (two "
        "order statistics of the data, with exact binomial ranks) is drawn for reference "
        "only: it publishes raw data values and is not private."
    )
    theta_text = ", ".join(f"{_LABEL[m]} θ = {config.granularity[m]:g}" for m in methods)
    design = get_design(config.design)
    setting = (
        f"{design.description}, n = {config.n}, α = {config.alpha:g}, "
        f"R = [{config.bounds[0]:g}, {config.bounds[1]:g}], {theta_text}"
    )

    # ---- 1. one synthetic data set -------------------------------------------------
    sec.heading("One data set from the paper's design")
    data_ss, mech_ss = streams[0].spawn(2)
    x = design.sample(config.n, rng=np.random.default_rng(data_ss))
    mech_rng = np.random.default_rng(mech_ss)
    np_ci = dpfair.median.nonprivate_interval(x, alpha=config.alpha)
    one = _every_method_interval(
        x, methods, config.rho, config.bounds, config.alpha, config.granularity, mech_rng
    )
    tick("median: one synthetic data set", len(methods))
    np_width = np_ci.high - np_ci.low
    rows = [("nonprivate", np_ci.low, np_ci.high, np_ci.estimate)] + [
        (m, r.low, r.high, r.estimate) for m, r in one.items()
    ]
    fig = _interval_figure(rows, design.median, "value")
    sec.figure(
        FigureBlock(
            "fig-median-one",
            "Figure 1: the four private intervals and the non-private interval on one sample",
            figure_to_data_uri(fig),
            f"Setting: {setting}. Dots mark the point estimates (midpoints; the sample "
            f"median for the non-private interval). Seed {seed}. Privacy: each private "
            f"interval spends {_privacy_text(list(one.values()))} (as its result reports); "
            "the four are alternatives, and publishing all four on the same data would "
            f"compose to ρ = {len(methods) * config.rho:g}.",
            look=_look_one(one, np_width, design.median),
        )
    )
    sec.raw(
        table(
            ["method", "θ", "low", "high", "width", "relative width", "privacy spent"],
            [["non-private", "-", np_ci.low, np_ci.high, np_width, 1.0, "none (not private)"]]
            + [
                [
                    _LABEL[m],
                    r.granularity,
                    r.low,
                    r.high,
                    r.high - r.low,
                    (r.high - r.low) / np_width,
                    str(r.privacy),
                ]
                for m, r in one.items()
            ],
        )
    )
    sec.results["one_dataset"] = {
        "setting": setting,
        "nonprivate": np_ci.to_dict(),
        "private": {m: r.to_dict() for m, r in one.items()},
    }

    # ---- 2. relative width against rho ---------------------------------------------
    # Repetitions of the registered study "median-sweep-rho" (its trial function, the
    # runner's seeds): each interval on its own data set of the paper's design.
    sec.heading("Relative width against the privacy budget")
    run_width = get_experiment("median-sweep-rho").run_one
    rel: dict[str, dict[float, list[float]]] = {
        m: {rho: [] for rho in config.rhos} for m in methods
    }
    width_rows: list[Mapping[str, Any]] = []
    n_w = config.width_datasets * config.width_runs
    width_seed = int(streams[1].generate_state(1)[0])
    for cell, (rho, m) in enumerate((r, mm) for r in config.rhos for mm in methods):
        params = _trial_params(config, m, rho, config.bounds)
        for rep in range(n_w):
            out = run_width(params, rep_seed(width_seed, cell, rep))
            rel[m][rho].append(float(out["rel_width"]))
            width_rows.append(out)
        tick("median: relative width vs ρ", n_w)
    fig = new_figure(7.5, 3.8)
    ax = fig.add_subplot()
    rhos = np.array(config.rhos)
    for m in methods:
        q = np.array([np.percentile(rel[m][rho], [25, 50, 75]) for rho in config.rhos])
        ax.plot(rhos, q[:, 1], "o-", color=_COLOR[m], label=_LABEL[m])
        ax.fill_between(rhos, q[:, 0], q[:, 2], color=_COLOR[m], alpha=0.15, lw=0)
    ax.axhline(1.0, color="black", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xticks(rhos, [f"{r:g}" for r in rhos])
    ax.set_xlabel("ρ (zCDP) per interval")
    ax.set_ylabel("width / non-private width")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    n_w = config.width_datasets * config.width_runs
    sec.figure(
        FigureBlock(
            "fig-median-width",
            "Figure 2: relative width (the paper's metric) against ρ",
            figure_to_data_uri(fig),
            f"Setting: {setting}. Median (line) and interquartile range (band) over {n_w} "
            "intervals per method and ρ, each on its own simulated data set (repetitions "
            "of the registered study median-sweep-rho); relative width = private width / "
            "width of the non-private interval on the same data set. "
            f"Seed {seed}. Privacy: each interval spends the ρ on the horizontal axis "
            f"({_rho_text(width_rows)}); these are simulations, not releases.",
            look=_look_width(rel, config.rhos),
        )
    )
    sec.raw(
        table(
            ["method", *[f"ρ = {r:g}" for r in config.rhos]],
            [[_LABEL[m], *[float(np.median(rel[m][r])) for r in config.rhos]] for m in methods],
        )
    )
    sec.results["relative_width"] = {
        "setting": setting,
        "intervals": n_w,
        "study": "median-sweep-rho",
        "median": {m: {str(r): float(np.median(rel[m][r])) for r in config.rhos} for m in methods},
        "quartiles": {
            m: {str(r): np.percentile(rel[m][r], [25, 75]).tolist() for r in config.rhos}
            for m in methods
        },
    }

    # ---- 3. coverage ---------------------------------------------------------------
    sec.heading("Empirical coverage")
    # Repetitions of the registered study "median-coverage" (design_trial): one interval
    # per data set; the non-private interval is scored on the first method's data sets.
    run_cov = get_experiment("median-coverage").run_one
    cov: dict[str, dict[str, tuple[int, int]]] = {}
    cov_rows_raw: list[Mapping[str, Any]] = []
    cov_seed = int(streams[2].generate_state(1)[0])
    cell = 0
    for name in config.coverage_designs:
        dsg = get_design(name)
        hits = dict.fromkeys(("nonprivate", *methods), 0)
        for m in methods:
            params = {**_trial_params(config, m, config.rho, dsg.bounds), "design": name}
            for rep in range(config.coverage_datasets):
                out = run_cov(params, rep_seed(cov_seed, cell, rep))
                hits[m] += int(bool(out["covered"]))
                if m == methods[0]:
                    hits["nonprivate"] += int(bool(out["nonprivate_covered"]))
                cov_rows_raw.append(out)
            cell += 1
            tick(f"median: coverage ({name})", config.coverage_datasets)
        cov[name] = {k: (v, config.coverage_datasets) for k, v in hits.items()}
    keys = ("nonprivate", *methods)
    fig = new_figure(7.5, 3.6)
    ax = fig.add_subplot()
    step = 0.8 / len(keys)
    lowest = 1.0
    for j, key in enumerate(keys):
        pos = np.arange(len(config.coverage_designs)) + (j - (len(keys) - 1) / 2) * step
        est, lo_err, hi_err = [], [], []
        for name in config.coverage_designs:
            k, n = cov[name][key]
            lo, hi = _clopper_pearson(k, n)
            est.append(k / n)
            lo_err.append(k / n - lo)
            hi_err.append(hi - k / n)
            lowest = min(lowest, lo)
        ax.errorbar(
            pos,
            est,
            yerr=[lo_err, hi_err],
            fmt="o",
            color=_COLOR[key],
            ecolor=_COLOR[key],
            capsize=3,
            label=_LABEL[key],
        )
    ax.axhline(
        1 - config.alpha, color="black", ls="--", lw=1, label=f"1 − α = {1 - config.alpha:g}"
    )
    ax.set_ylim(max(0.0, min(lowest, 1 - config.alpha) - 0.02), 1.005)
    ax.set_xlim(-0.5, len(config.coverage_designs) - 0.5)
    ax.set_xticks(range(len(config.coverage_designs)), list(config.coverage_designs))
    ax.set_ylabel("empirical coverage")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    sec.figure(
        FigureBlock(
            "fig-median-coverage",
            "Figure 3: empirical coverage with exact 95% Clopper–Pearson intervals",
            figure_to_data_uri(fig),
            f"Setting: n = {config.n}, α = {config.alpha:g}, "
            f"R = [{config.bounds[0]:g}, {config.bounds[1]:g}], {theta_text}; "
            f"{config.coverage_datasets} independent data sets per design and method, one "
            "interval each (repetitions of the registered study median-coverage). With this "
            "many repetitions the check only detects gross under-coverage; the test suite "
            f"runs the sized binomial tests. Seed {seed}. Privacy: each interval spends "
            f"{_rho_text(cov_rows_raw)}.",
            look=_look_coverage(cov, keys, config.alpha),
        )
    )
    cov_rows = []
    for name in config.coverage_designs:
        for key in keys:
            k, n = cov[name][key]
            lo, hi = _clopper_pearson(k, n)
            cov_rows.append([name, _LABEL[key], f"{k}/{n}", k / n, f"[{lo:.3f}, {hi:.3f}]"])
    sec.raw(table(["design", "method", "covered", "coverage", "95% CI"], cov_rows))
    sec.results["coverage"] = {
        name: {key: {"covered": v[0], "trials": v[1]} for key, v in cov[name].items()}
        for name in config.coverage_designs
    }

    # ---- 4. bundled real data ------------------------------------------------------
    entry = BUNDLED[config.real_dataset]
    sec.heading(f"Real data: {entry.description}")
    x = load_bundled(config.real_dataset)
    g = np.random.default_rng(streams[3])
    np_real = dpfair.median.nonprivate_interval(x, alpha=config.alpha)
    real = _every_method_interval(
        x, methods, config.real_rho, entry.bounds, config.alpha,
        dict.fromkeys(methods, config.real_granularity), g,
    )
    tick("median: bundled data", len(methods))
    rows = [("nonprivate", np_real.low, np_real.high, np_real.estimate)] + [
        (m, r.low, r.high, r.estimate) for m, r in real.items()
    ]
    fig = _interval_figure(rows, None, f"{entry.column} ({entry.unit})")
    sec.figure(
        FigureBlock(
            "fig-median-real",
            f"Figure 4: median {entry.column} in the bundled '{entry.name}' data set",
            figure_to_data_uri(fig),
            f"Setting: n = {x.size}, α = {config.alpha:g}, public range "
            f"R = [{entry.bounds[0]:g}, {entry.bounds[1]:g}] {entry.unit} (chosen a priori, "
            f"not read off the data), θ = {config.real_granularity:g} for every method. Ages "
            "are whole years, so many records tie and the non-private interval can have zero "
            "width; it is shown only because this data set is already public. "
            f"Data: {entry.licence}. Seed {seed}. Privacy: each interval spends "
            f"{_privacy_text(list(real.values()))}; all four together would compose to "
            f"ρ = {len(methods) * config.real_rho:g}.",
            look=_look_real(real, entry.unit),
        )
    )
    sec.raw(
        table(
            ["method", "θ", "low", "high", "width", "privacy spent"],
            [
                [
                    "non-private",
                    "-",
                    np_real.low,
                    np_real.high,
                    np_real.high - np_real.low,
                    "none (not private)",
                ]
            ]
            + [
                [_LABEL[m], r.granularity, r.low, r.high, r.high - r.low, str(r.privacy)]
                for m, r in real.items()
            ],
        )
    )
    sec.results["bundled"] = {
        "dataset": asdict(entry),
        "nonprivate": np_real.to_dict(),
        "private": {m: r.to_dict() for m, r in real.items()},
    }
    _quartiles_part(sec, config, x, entry, seed, streams[4])
    tick("median: quartiles and CDF band", 2)
    _summarise(sec, config, cov, keys, rel, real, entry)
    return sec


def _summarise(sec: Section, config: MedianReportConfig, cov: Mapping[str, Any],
               keys: Sequence[str], rel: Mapping[str, Mapping[float, list[float]]],
               real: Mapping[str, Any], entry: Any) -> None:
    """The section's plain-language summary, from its own numbers."""
    private = [k for k in keys if k != "nonprivate"]
    shares = [cov[d][k][0] / cov[d][k][1] for d in cov for k in private]
    rho = config.rho if config.rho in config.rhos else config.rhos[-1]
    widths = [float(np.median(rel[m][rho])) for m in private]
    sec.summary(
        f"The four private methods covered the true median in {min(shares):.1%} to "
        f"{max(shares):.1%} of the simulated data sets (the promise: at least "
        f"{1 - config.alpha:.0%}), and at ρ = {rho:g} their intervals were "
        f"{min(widths):.2g} to {max(widths):.2g} times as wide as the classical non-private "
        "interval: that extra width is the price of privacy."
    )
    lows = [r.low for r in real.values()]
    highs = [r.high for r in real.values()]
    sec.summary(
        f"On real data ('{entry.name}', {next(iter(real.values())).n:,} records), every "
        "private interval for the median "
        f"{entry.column} lies within [{min(lows):.4g}, {max(highs):.4g}] {entry.unit}, each "
        f"for ρ = {config.real_rho:g}."
    )


def _look_one(one: Mapping[str, Any], np_width: float, truth: float) -> str:
    ratios = [(r.high - r.low) / np_width for r in one.values()]
    covered = sum(r.low <= truth <= r.high for r in one.values())
    n = next(iter(one.values())).n
    return (
        f"each bar is a 95% interval for the median from the same {n:,} values; the private "
        f"ones (coloured) are {min(ratios):.2g} to {max(ratios):.2g} times as wide as the "
        f"non-private one (grey), and {covered} of {len(ratios)} cross the dashed line, the "
        "true median of the population."
    )


def _look_width(rel: Mapping[str, Mapping[float, list[float]]], rhos: Sequence[float]) -> str:
    lo, hi = rhos[0], rhos[-1]
    w_lo = min(float(np.median(rel[m][lo])) for m in rel)
    w_hi = max(float(np.median(rel[m][hi])) for m in rel)
    falling = all(float(np.median(rel[m][hi])) <= float(np.median(rel[m][lo])) for m in rel)
    return (
        f"{'every curve falls' if falling else 'the curves mostly fall'} from left to right: "
        "with more budget ρ (less privacy) the private "
        f"interval approaches the non-private width (the dotted line at 1); at ρ = {hi:g} the "
        f"widest method is {w_hi:.2g} times the non-private width, at ρ = {lo:g} the "
        f"narrowest is already {w_lo:.2g} times."
    )


def _look_coverage(cov: Mapping[str, Any], keys: Sequence[str], alpha: float) -> str:
    shares = [cov[d][k][0] / cov[d][k][1] for d in cov for k in keys if k != "nonprivate"]
    return (
        f"every dot should sit on or above the dashed line at {1 - alpha:g}: the share of "
        f"simulated data sets whose interval contained the true median (here "
        f"{min(shares):.1%} to {max(shares):.1%} for the private methods); the bars are "
        "exact 95% uncertainty ranges of those shares."
    )


def _look_real(real: Mapping[str, Any], unit: str) -> str:
    widths = [r.high - r.low for r in real.values()]
    return (
        f"on real data with {next(iter(real.values())).n:,} records the price of privacy is "
        "small: every private "
        f"interval is at most {max(widths):.3g} {unit} wide."
    )


def _quartiles_part(sec: Section, config: MedianReportConfig, x: Any, entry: Any, seed: int,
                    stream: np.random.SeedSequence) -> None:
    """Part 5: quartiles with simultaneous coverage and a CDF band (dpfair.quantiles)."""
    qs = (0.25, 0.5, 0.75)
    sec.heading(f"Real data: quartiles and the CDF of {entry.column}")
    g = np.random.default_rng(stream)
    fam = dpfair.quantiles.confidence_intervals(
        x, qs, rho=config.real_rho, bounds=entry.bounds, alpha=config.alpha, method="cdf",
        rng=g)
    band = dpfair.quantiles.cdf_band(x, rho=config.real_rho, bounds=entry.bounds,
                                     alpha=config.alpha, granularity=1.0, rng=g)
    # the non-private reference at the same simultaneous level (Bonferroni over 3)
    ref = [dpfair.quantiles.nonprivate_interval(x, q, config.alpha / len(qs)) for q in qs]
    sorted_x = np.sort(x)
    fig = new_figure(7.5, 3.8)
    ax = fig.add_subplot()
    emp = np.searchsorted(sorted_x, band.grid, side="right") / sorted_x.size
    ax.fill_between(band.grid, band.lower, band.upper, step="post", color="#d62728",
                    alpha=0.2, lw=0, label=f"DP {1 - config.alpha:g} band")
    ax.step(band.grid, band.values, where="post", color="#d62728", lw=1.2, label="DP CDF")
    ax.step(band.grid, emp, where="post", color="#444444", lw=1, ls="--",
            label="empirical CDF (not private)")
    for iv in fam:
        ax.plot([iv.low, iv.high], [iv.q, iv.q], color="#1f77b4", lw=4,
                solid_capstyle="butt")
    ax.plot([], [], color="#1f77b4", lw=4, label="DP quartile intervals")
    ax.set_xlabel(f"{entry.column} ({entry.unit})")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    spent = float(fam.privacy.rho or 0.0) + float(band.privacy.rho or 0.0)
    sec.figure(
        FigureBlock(
            "fig-median-quartiles",
            f"Figure 5: quartiles and CDF band of {entry.column} in '{entry.name}'",
            figure_to_data_uri(fig),
            f"Setting: n = {x.size}, public range R = [{entry.bounds[0]:g}, "
            f"{entry.bounds[1]:g}] {entry.unit}, α = {config.alpha:g}. Quartile intervals: "
            "dpfair.quantiles.confidence_intervals (method 'cdf', one noisy tree serves all "
            "three), covering all three quartiles together with probability ≥ 1 − α. CDF "
            f"band: dpfair.quantiles.cdf_band on a grid of step ≤ 1 {entry.unit}, covering "
            "the whole CDF with probability ≥ 1 − α. The dashed empirical CDF and the "
            "non-private intervals in the table are shown only because this data set is "
            f"already public. Seed {seed}. Privacy: the quartiles and the band spend "
            f"ρ = {config.real_rho:g} each, {spent:g}-zCDP together, i.e. "
            f"({zcdp_to_approx_epsilon(spent, _DELTA):.3g}, {_DELTA:g})-DP.",
            look=("the red band is the private estimate of the share of people at or below "
                  "each age; it should hug the dashed (non-private) curve. The blue bars on "
                  "the 0.25, 0.5 and 0.75 lines are the private intervals for the quartiles."),
        )
    )
    sec.raw(
        table(
            ["quantile", "DP low", "DP high", "non-private low", "non-private high",
             "privacy spent"],
            [[f"{iv.q:g}", iv.low, iv.high, lo, hi, str(iv.privacy)]
             for iv, (lo, hi) in zip(fam, ref, strict=True)],
        )
    )
    sec.results["quartiles"] = {
        "dp": fam.to_dict(),
        "nonprivate": [[lo, hi] for lo, hi in ref],
        "cdf_band": {"alpha": band.alpha, "privacy": band.privacy.to_dict(),
                     "max_half_width": float(np.max(band.upper - band.lower) / 2.0)},
    }

"""Per-method Monte Carlo runs of paper 004's metrics: relative width and coverage.

The registered studies (``dpfair reproduce median-width``, ``median-coverage``,
``median-sweep-n``; :mod:`dpfair.experiments._median`) tabulate these metrics over their
grids. Here :func:`run_study` runs one method at one setting and keeps every run's outcome
(the width tests of :mod:`dpfair.median` use it); :func:`paper_width_table` (100 data sets
× 5 runs at the paper's setting) and :func:`coverage_table` (5000 fresh data sets per
cell) produce the tables in ``docs/results/`` (``benchmarks/median_paper_tables.py``).
They follow paper 004's design: draw ``n_datasets`` samples from a population, run the
private method ``runs_per_dataset`` times on each sample, and compare with the
non-private interval (relative width) and the population median (coverage). Seeds are
derived with ``numpy.random.SeedSequence.spawn``, one child per data set, so results do
not depend on the order in which data sets are processed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._validation import check_positive_int
from dpfair.median import confidence_interval, nonprivate_interval

__all__ = [
    "COVERAGE_DESIGNS",
    "StudyResult",
    "coverage_table",
    "lognormal_population",
    "paper_width_table",
    "run_study",
]

Sampler = Callable[[int, np.random.Generator], NDArray[np.float64]]


def lognormal_population(sigma: float = 1.0) -> tuple[Sampler, float]:
    """The paper's population: exp(N(ln 1.5, σ²)); its median is 1.5."""

    def sample(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        return rng.lognormal(np.log(1.5), sigma, n)

    return sample, 1.5


@dataclass(frozen=True)
class StudyResult:
    """Per-run outcomes of a study (arrays of shape (n_datasets * runs_per_dataset,)).

    Attributes
    ----------
    method : str
    rho, alpha : float
    n : int
    relative_width : ndarray
        Width of the DP interval over the width of the non-private interval on the same
        sample (paper 004's metric).
    covered : ndarray of bool
        Whether the DP interval contains the population median.
    settings : dict
        Everything needed to reproduce the study (seed, bounds, granularity, ...).
    """

    method: str
    rho: float
    alpha: float
    n: int
    relative_width: NDArray[np.float64]
    covered: NDArray[np.bool_]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def coverage(self) -> float:
        """Empirical coverage."""
        return float(np.mean(self.covered))

    @property
    def median_relative_width(self) -> float:
        """Median of the relative widths (the paper's box-plot centre)."""
        return float(np.median(self.relative_width))

    def to_dict(self) -> dict[str, Any]:
        """Summary as a JSON-ready dict."""
        q = np.quantile(self.relative_width, [0.25, 0.5, 0.75])
        return {"method": self.method, "rho": self.rho, "alpha": self.alpha, "n": self.n,
                "runs": int(self.covered.size), "coverage": self.coverage,
                "relative_width_quartiles": q.tolist(), **self.settings}


def run_study(
    method: str,
    *,
    rho: float,
    n: int,
    bounds: tuple[float, float],
    sampler: Sampler,
    population_median: float,
    alpha: float = 0.05,
    granularity: float | None = None,
    n_datasets: int = 100,
    runs_per_dataset: int = 5,
    seed: int = 0,
    methods_share_data: Sequence[str] | None = None,
) -> StudyResult:
    """Run one cell of the paper's simulation (see module docstring).

    ``methods_share_data`` is accepted for symmetry with multi-method drivers and ignored:
    the data sets depend only on ``seed``, so every method sees the same samples.
    """
    del methods_share_data
    check_positive_int("n_datasets", n_datasets)
    check_positive_int("runs_per_dataset", runs_per_dataset)
    children = np.random.SeedSequence(seed).spawn(n_datasets)
    widths = np.empty(n_datasets * runs_per_dataset)
    covered = np.empty(n_datasets * runs_per_dataset, dtype=bool)
    i = 0
    for child in children:
        data_seed, mech_seed = child.spawn(2)
        x = sampler(n, np.random.default_rng(data_seed))
        reference = nonprivate_interval(x, alpha).width
        gen = np.random.default_rng(mech_seed)
        for _ in range(runs_per_dataset):
            r = confidence_interval(x, rho=rho, bounds=bounds, alpha=alpha, method=method,
                                    granularity=granularity, rng=gen)
            widths[i] = r.width / reference if reference > 0 else np.inf
            covered[i] = r.low <= population_median <= r.high
            i += 1
    settings = {"bounds": list(bounds), "granularity": granularity, "seed": seed,
                "n_datasets": n_datasets, "runs_per_dataset": runs_per_dataset}
    return StudyResult(method, float(rho), float(alpha), int(n), widths, covered, settings)


def paper_width_table(
    rhos: Sequence[float] = (0.1, 0.5, 1.0),
    *,
    n: int = 1000,
    n_datasets: int = 100,
    runs_per_dataset: int = 5,
    seed: int = 2024,
) -> list[dict[str, Any]]:
    """Relative widths at paper 004's setting for all four methods.

    Log-normal σ = 1, n = 1000, α = 0.05, R = [−5, 15], θ = 0.005 for ExpMech and 0.05 for
    the tree-based methods, 100 data sets × 5 runs.
    """
    from dpfair.median import METHODS

    sampler, median = lognormal_population(1.0)
    rows = []
    for rho in rhos:
        for method in METHODS:
            theta = 0.005 if method == "expmech" else 0.05
            res = run_study(method, rho=rho, n=n, bounds=(-5.0, 15.0), sampler=sampler,
                            population_median=median, granularity=theta,
                            n_datasets=n_datasets, runs_per_dataset=runs_per_dataset,
                            seed=seed)
            rows.append(res.to_dict())
    return rows


def _coverage_cell(args: tuple[str, str, int, float, int, int]) -> dict[str, Any]:
    from scipy import stats

    method, design, n, rho, reps, seed = args
    law = COVERAGE_DESIGNS[design](stats)
    med = float(law.median())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        r = confidence_interval(x, rho=rho, bounds=(-5.0, 15.0), alpha=0.05, method=method,
                                rng=rng)
        hits += bool(r.low <= med <= r.high)
    lower = float(stats.beta.ppf(1e-6, hits, reps - hits + 1)) if hits else 0.0
    return {"method": method, "design": design, "n": n, "rho": rho, "reps": reps,
            "covered": hits, "coverage": hits / reps, "lower_bound_1e-6": lower}


#: Populations of the coverage sweep (factories of frozen scipy laws), all with their
#: median inside R = [−5, 15].
COVERAGE_DESIGNS: dict[str, Callable[[Any], Any]] = {
    "lognormal-sigma1": lambda st: st.lognorm(s=1.0, scale=1.5),
    "lognormal-sigma5": lambda st: st.lognorm(s=5.0, scale=1.5),
    "normal": lambda st: st.norm(loc=3.0, scale=2.0),
    "uniform": lambda st: st.uniform(loc=0.0, scale=10.0),
    "pareto-heavy": lambda st: st.pareto(b=1.1),
    "poisson-ties": lambda st: st.poisson(3.5),
}


def coverage_table(
    settings: Sequence[tuple[int, float]] = ((50, 1.0), (1000, 0.1), (1000, 0.5), (1000, 1.0)),
    *,
    reps: int = 5000,
    seed: int = 0,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """Empirical coverage of every method on every design (independent samples per run).

    Each cell reports the count, the coverage and its exact one-sided Clopper–Pearson lower
    bound at level 1e-6. Cells are seeded from ``SeedSequence(seed)`` children in a fixed
    order, so the table does not depend on ``workers``.
    """
    from concurrent.futures import ProcessPoolExecutor

    from dpfair.median import METHODS

    cells = [(m, d, n, rho) for (n, rho) in settings for d in COVERAGE_DESIGNS for m in METHODS]
    seeds = [int(c.generate_state(1)[0]) for c in np.random.SeedSequence(seed).spawn(len(cells))]
    jobs = [(m, d, n, rho, reps, sd) for (m, d, n, rho), sd in zip(cells, seeds, strict=True)]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            return list(pool.map(_coverage_cell, jobs))
    return [_coverage_cell(job) for job in jobs]

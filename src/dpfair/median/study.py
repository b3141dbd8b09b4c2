"""Monte Carlo studies of the paper's metrics: relative width and empirical coverage.

Both follow paper 004's design: draw ``n_datasets`` samples from a population, run each
private method ``runs_per_dataset`` times on each sample, and compare with the
non-private interval (relative width) or the population median (coverage). Seeds are
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
from dpfair.median._api import confidence_interval, nonprivate_interval

__all__ = ["StudyResult", "lognormal_population", "paper_width_table", "run_study"]

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
    from dpfair.median._api import METHODS

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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m dpfair.median.study``: print the paper-setting relative-width table."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=paper_width_table.__doc__)
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = paper_width_table(n_datasets=args.datasets, runs_per_dataset=args.runs,
                             seed=args.seed)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'rho':>5} {'method':<14} {'q25':>6} {'median':>7} {'q75':>6} {'coverage':>9}")
    for row in rows:
        q = row["relative_width_quartiles"]
        print(f"{row['rho']:>5} {row['method']:<14} {q[0]:6.3f} {q[1]:7.3f} {q[2]:6.3f} "
              f"{row['coverage']:9.3f}")


if __name__ == "__main__":
    main()

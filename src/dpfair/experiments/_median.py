"""Trials and grids of the studies of paper 004: private confidence intervals for the median.

Every repetition draws one fresh data set and computes one private interval on it with
:func:`dpfair.median.confidence_interval`, next to the non-private reference
:func:`dpfair.median.nonprivate_interval` on the same data (public API only).

The paper runs each mechanism 5 times on each of 100 data sets (widths) and 1000 data sets
(coverage). Here every trial has its own data set: each trial has the same distribution as
the paper's, but trials are independent, so the summary's intervals (Student-t for means,
exact Clopper–Pearson for coverage) are valid without a clustering correction. The default
repetition counts match the paper's trial counts: 500 per cell for widths and sweeps,
5000 per cell for coverage.

Registered experiments
----------------------
Each is registered by its own module of :mod:`dpfair.experiments`, named after it
(``my-study`` in ``my_study.py``).

``median-width``
    Relative width and coverage at the paper's setting for every method and
    ρ ∈ {0.1, 0.5, 1} (issue 2's headline table).
``median-coverage``
    Empirical coverage of every method on every synthetic design at
    (n, ρ) ∈ {(50, 1), (1000, 0.1), (1000, 0.5), (1000, 1)}.
``median-sweep-n``, ``median-sweep-rho``, ``median-sweep-sigma``, ``median-sweep-range``
    The paper's sweeps of n, ρ, σ and |R| around its setting (§5, Fig. 6).
``median-smoke``
    A few seconds' study to check an installation or a Dask cluster.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import dpfair.median
from dpfair.data import get_design, lognormal_sample
from dpfair.data.synthetic import PAPER_BOUNDS

__all__ = ["PAPER_THETA", "design_trial", "lognormal_trial"]

#: The paper's granularities on R = [−5, 15] (paper 004, §5): θ = 0.005 for ExpMech and
#: 0.05 for the tree-based methods.
PAPER_THETA: dict[str, float] = {
    "expmech": 0.005,
    "cdf": 0.05,
    "binsearch": 0.05,
    "binsearch_cdf": 0.05,
}

_METRICS = ("rel_width", "covered")
_REF = "paper 004 (DP confidence intervals for the median), §5"


def _compare(
    x: np.ndarray, population_median: float, params: dict[str, Any], rng: np.random.SeedSequence
) -> dict[str, Any]:
    """One private interval on ``x`` against the non-private one on the same data."""
    alpha = float(params["alpha"])
    reference = dpfair.median.nonprivate_interval(x, alpha)
    r = dpfair.median.confidence_interval(
        x,
        rho=float(params["rho"]),
        bounds=(float(params["r_low"]), float(params["r_high"])),
        alpha=alpha,
        method=str(params["method"]),
        granularity=float(params["theta"]),
        rng=rng,
    )
    return {
        "low": r.low,
        "high": r.high,
        "width": r.width,
        "nonprivate_width": reference.width,
        "rel_width": r.width / reference.width if reference.width > 0 else math.inf,
        "covered": bool(r.low <= population_median <= r.high),
        "nonprivate_covered": bool(reference.low <= population_median <= reference.high),
        "rho_spent": float(r.privacy.rho if r.privacy.rho is not None else math.nan),
    }


def lognormal_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """The paper's design: n points of exp(N(ln 1.5, σ²)) (median 1.5), one interval.

    ``params``: ``method``, ``n``, ``rho``, ``sigma``, ``alpha``, ``r_low``, ``r_high``,
    ``theta``. Outputs: ``low``, ``high``, ``width``, ``nonprivate_width``, ``rel_width``
    (the paper's metric), ``covered``, ``nonprivate_covered``, ``rho_spent``.
    """
    data_seed, noise_seed = seed.spawn(2)
    x = lognormal_sample(int(params["n"]), sigma=float(params["sigma"]), rng=data_seed)
    return _compare(x, 1.5, params, noise_seed)


def design_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """A synthetic design of :data:`dpfair.data.DESIGNS` (``params["design"]``), one interval.

    Outputs as :func:`lognormal_trial`; ``covered`` is against the design's exact median.
    """
    data_seed, noise_seed = seed.spawn(2)
    design = get_design(str(params["design"]))
    x = design.sample(int(params["n"]), rng=data_seed)
    return _compare(x, design.median, params, noise_seed)


def _paper_cell(method: str, **overrides: Any) -> dict[str, Any]:
    """The paper's setting (log-normal σ = 1, n = 1000, ρ = 0.5, α = 0.05, R = [−5, 15])."""
    cell: dict[str, Any] = {
        "method": method,
        "n": 1000,
        "rho": 0.5,
        "sigma": 1.0,
        "alpha": 0.05,
        "r_low": PAPER_BOUNDS[0],
        "r_high": PAPER_BOUNDS[1],
        "theta": PAPER_THETA[method],
    }
    cell.update(overrides)
    return cell


_METHODS = dpfair.median.METHODS

#: (n, ρ) settings of the coverage study (n = 50 needs ρ = 1 for BinSearch+CDF to have a
#: valid target rank at α/4).
COVERAGE_SETTINGS: tuple[tuple[int, float], ...] = ((50, 1.0), (1000, 0.1), (1000, 0.5),
                                                    (1000, 1.0))
_COVERAGE_DESIGNS = ("lognormal", "lognormal_sigma5", "normal", "uniform", "skewed_heavy")

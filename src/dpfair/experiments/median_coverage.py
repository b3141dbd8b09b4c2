"""The registered study ``median-coverage`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-coverage``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import (
    _COVERAGE_DESIGNS,
    _METHODS,
    _REF,
    COVERAGE_SETTINGS,
    PAPER_BOUNDS,
    PAPER_THETA,
    design_trial,
)
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-coverage",
    description=(
        "Empirical coverage (target 0.95) of every method on the synthetic designs "
        "(log-normal sigma 1 and 5, normal, uniform, Pareto) at (n, rho) in "
        "{(50, 1), (1000, 0.1), (1000, 0.5), (1000, 1)}; R=[-5, 15], paper thetas."
    ),
    grid=[
        {
            "method": m,
            "design": d,
            "n": n,
            "rho": rho,
            "alpha": 0.05,
            "r_low": PAPER_BOUNDS[0],
            "r_high": PAPER_BOUNDS[1],
            "theta": PAPER_THETA[m],
        }
        for (n, rho) in COVERAGE_SETTINGS
        for d in _COVERAGE_DESIGNS
        for m in _METHODS
    ],
    reps=5000,
    metrics=("covered", "rel_width"),
    reference=f"{_REF} (coverage, 5000 trials per cell); issue 2 (coverage tests)",
)(design_trial)

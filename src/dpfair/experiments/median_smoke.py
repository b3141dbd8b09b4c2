"""The registered study ``median-smoke`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-smoke``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import _METHODS, _METRICS, _REF, _paper_cell, lognormal_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-smoke",
    description=(
        "A small study (8 cells x 20 reps, seconds) to check an installation or a cluster: "
        "every method at n=200, rho in {0.5, 1}, the paper's design otherwise."
    ),
    grid=[_paper_cell(m, n=200, rho=rho) for rho in (0.5, 1.0) for m in _METHODS],
    reps=20,
    metrics=_METRICS,
    reference=_REF,
)(lognormal_trial)

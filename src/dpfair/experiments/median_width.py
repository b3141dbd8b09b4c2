"""The registered study ``median-width`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-width``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import _METHODS, _METRICS, _REF, _paper_cell, lognormal_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-width",
    description=(
        "Relative width (private / non-private CI width) and coverage at the paper's "
        "setting: log-normal sigma=1, n=1000, alpha=0.05, R=[-5, 15], theta=0.005 "
        "(ExpMech) / 0.05 (tree methods), every method, rho in {0.1, 0.5, 1}."
    ),
    grid=[_paper_cell(m, rho=rho) for rho in (0.1, 0.5, 1.0) for m in _METHODS],
    reps=500,
    metrics=_METRICS,
    reference=f"{_REF}; issue 2 (relative width table)",
)(lognormal_trial)

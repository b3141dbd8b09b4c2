"""The registered study ``median-sweep-n`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-sweep-n``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import _METHODS, _METRICS, _REF, _paper_cell, lognormal_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-sweep-n",
    description="Relative width vs the sample size n (paper's setting otherwise, rho=0.5).",
    grid=[_paper_cell(m, n=n) for n in (100, 300, 1000, 3000, 10000, 30000) for m in _METHODS],
    reps=500,
    metrics=_METRICS,
    reference=f"{_REF}, Fig. 6 (sweep of n)",
)(lognormal_trial)

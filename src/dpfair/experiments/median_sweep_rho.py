"""The registered study ``median-sweep-rho`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-sweep-rho``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import _METHODS, _METRICS, _REF, _paper_cell, lognormal_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-sweep-rho",
    description="Relative width vs the privacy budget rho (paper's setting otherwise, n=1000).",
    grid=[
        _paper_cell(m, rho=rho) for rho in (0.01, 0.03, 0.1, 0.3, 1.0, 3.0) for m in _METHODS
    ],
    reps=500,
    metrics=_METRICS,
    reference=f"{_REF}, Fig. 6 (sweep of rho)",
)(lognormal_trial)

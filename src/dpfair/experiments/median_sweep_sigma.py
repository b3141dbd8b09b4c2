"""The registered study ``median-sweep-sigma`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-sweep-sigma``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import _METHODS, _METRICS, _REF, _paper_cell, lognormal_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-sweep-sigma",
    description=(
        "Relative width vs the spread sigma of the log-normal design (paper's setting "
        "otherwise; the paper's two designs are sigma=1 and sigma=5)."
    ),
    grid=[_paper_cell(m, sigma=s) for s in (0.25, 0.5, 1.0, 2.0, 5.0) for m in _METHODS],
    reps=500,
    metrics=_METRICS,
    reference=f"{_REF}, Fig. 6 (sweep of sigma)",
)(lognormal_trial)

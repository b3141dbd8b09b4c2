"""The registered study ``median-sweep-range`` (paper 004, median CIs).

Run it with ``dpfair reproduce median-sweep-range``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._median`.
"""

from __future__ import annotations

from dpfair.experiments._median import _METHODS, _METRICS, _REF, _paper_cell, lognormal_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="median-sweep-range",
    description=(
        "Relative width vs the size |R| of the public range R=[-|R|/4, 3|R|/4] (the paper's "
        "[-5, 15] is |R|=20), |R| in {5, 20, 100, 1000, 10000}, thetas fixed at the paper's. "
        "CDFPostProcess at |R|=10000 takes about 1 s per interval."
    ),
    grid=[
        _paper_cell(m, r_low=-w / 4.0, r_high=3.0 * w / 4.0)
        for w in (5.0, 20.0, 100.0, 1000.0, 10000.0)
        for m in _METHODS
    ],
    reps=500,
    metrics=_METRICS,
    reference=f"{_REF}, Fig. 6(d) (sweep of |R|)",
)(lognormal_trial)

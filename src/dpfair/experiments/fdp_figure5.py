"""The registered study ``fdp-figure5`` (paper 003, FDP-Fair).

Run it with ``dpfair reproduce fdp-figure5``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fdp`.
"""

from __future__ import annotations

from dpfair.experiments._fdp import _METRICS, _REF, fdp_grid, fdp_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fdp-figure5",
    description=(
        "Figure 5: effect of the number of sites, N_total = 7200 split over S in {1, ..., 5}, "
        "eps = 1, alpha in {0.1, 0.2}; default and paper rules."
    ),
    grid=fdp_grid((1, 2, 3, 4, 5), (1.0,), (0.1, 0.2), n_total=7200, n_test=2500),
    reps=200,
    metrics=_METRICS,
    reference=f"{_REF}; §5.1, Figure 5; issue 5",
)(fdp_trial)

"""The registered study ``fdp-figure4`` (paper 003, FDP-Fair).

Run it with ``dpfair reproduce fdp-figure4``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fdp`.
"""

from __future__ import annotations

from dpfair.experiments._fdp import _METRICS, _REF, fdp_grid, fdp_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fdp-figure4",
    description=(
        "Figure 4: FDP-Fair with N_s = 2000 per site, S in {4, 5, 6}, eps in {0.75, 1, 2, 3, "
        "4, 10} (delta_s = (N_s/2)^-2), alpha in {0.05, 0.1, 0.2, 0.3}; default (confidence) "
        "and paper threshold rules; test and population error / |DD|."
    ),
    grid=fdp_grid((4, 5, 6), (0.75, 1.0, 2.0, 3.0, 4.0, 10.0), (0.05, 0.1, 0.2, 0.3),
                  n_s=2000),
    reps=200,
    metrics=_METRICS,
    reference=f"{_REF}; §5.1, Figure 4; issue 5",
)(fdp_trial)

"""The registered study ``fdp-smoke`` (paper 003, FDP-Fair).

Run it with ``dpfair reproduce fdp-smoke``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fdp`.
"""

from __future__ import annotations

from dpfair.experiments._fdp import _METRICS, _REF, fdp_grid, fdp_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fdp-smoke",
    description="Seconds: S = 2, N_s = 1000, eps = 2, alpha = 0.2, both rules, 2 reps.",
    grid=fdp_grid((2,), (2.0,), (0.2,), n_s=1000, n_test=1000),
    reps=2,
    metrics=_METRICS,
    reference=_REF,
)(fdp_trial)

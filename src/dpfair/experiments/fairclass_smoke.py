"""The registered study ``fairclass-smoke`` (paper 003, CDP-Fair).

Run it with ``dpfair reproduce fairclass-smoke``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fairclass`.
"""

from __future__ import annotations

from dpfair.experiments._fairclass import _REF, _metrics, simulation_grid, simulation_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fairclass-smoke",
    description=(
        "A few seconds' version of fairclass-simulation: N=2000, eps=1, alpha in {0.1, 0.3}, "
        "1000 test points, the four methods, 3 repetitions."
    ),
    grid=simulation_grid(ns=(2000,), epsilons=(1.0,), alphas=(0.1, 0.3), n_test=1000),
    reps=3,
    metrics=_metrics((0.1, 0.3)),
    reference=f"{_REF}, §5.1",
)(simulation_trial)

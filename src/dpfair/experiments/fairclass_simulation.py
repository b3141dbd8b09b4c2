"""The registered study ``fairclass-simulation`` (paper 003, CDP-Fair).

Run it with ``dpfair reproduce fairclass-simulation``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fairclass`.
"""

from __future__ import annotations

from dpfair.experiments._fairclass import _REF, _metrics, simulation_grid, simulation_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fairclass-simulation",
    description=(
        "Figure 3: expected test error and |DD| of CDP-Fair and the three baselines on the "
        "paper's simulation, N in {5000, 7000, 9000}, eps in {0.75, 1, 2, 3, 4} "
        "(delta = (N/2)^-2), alpha in {0.05, ..., 0.6} (S1 fitted once per repetition), "
        "4000 test points; one repetition = one train/test draw, shared by all cells."
    ),
    grid=simulation_grid(),
    reps=200,
    metrics=_metrics((0.05, 0.1, 0.2, 0.3)),
    reference=f"{_REF}, §5.1, Figure 3; issue 4",
)(simulation_trial)

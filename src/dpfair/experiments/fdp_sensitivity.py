"""The registered study ``fdp-sensitivity`` (paper 003, FDP-Fair).

Run it with ``dpfair reproduce fdp-sensitivity``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fdp`.
"""

from __future__ import annotations

from dpfair.experiments._fdp import _METRICS, _REF, fdp_trial, sensitivity_grid
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fdp-sensitivity",
    description=(
        "Appendix A.2: S = 3, N_s = 2000, eps = 1, alpha = 0.3; the band rho in {0, ..., "
        "0.08} at C_omega = 0.1 and C_omega in {0.01, ..., 0.5} at rho = 0.03; both rules."
    ),
    grid=sensitivity_grid(),
    reps=200,
    metrics=_METRICS,
    reference=f"{_REF}; Appendix A.2",
)(fdp_trial)

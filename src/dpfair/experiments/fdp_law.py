"""The registered study ``fdp-law`` (paper 003, FDP-Fair).

Run it with ``dpfair reproduce fdp-law``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fdp`.
"""

from __future__ import annotations

from dpfair.experiments._fdp import _REAL_METRICS, _REF, fdp_real_trial, real_grid
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fdp-law",
    description=(
        "FDP-Fair with one site on Law School ($DPFAIR_LAW_SCHOOL_PATH; not bundled): random "
        "70/30 splits, eps = 1, rho = 0.02, alpha in {0.025, ..., 0.35}; both rules."
    ),
    grid=real_grid("law_school"),
    reps=200,
    metrics=_REAL_METRICS,
    reference=f"{_REF}; §5.2 (Law School)",
)(fdp_real_trial)

"""The registered study ``fdp-adult`` (paper 003, FDP-Fair).

Run it with ``dpfair reproduce fdp-adult``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fdp`.
"""

from __future__ import annotations

from dpfair.experiments._fdp import _REAL_METRICS, _REF, fdp_real_trial, real_grid
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fdp-adult",
    description=(
        "FDP-Fair with one site on Adult (bundled copy, or $DPFAIR_ADULT_PATH): random 70/30 "
        "splits, eps = 1, rho = 0.02, alpha in {0.025, ..., 0.35}; both rules; test error "
        "and |DD|."
    ),
    grid=real_grid("adult"),
    reps=200,
    metrics=_REAL_METRICS,
    reference=f"{_REF}; §5.2 (Adult)",
)(fdp_real_trial)

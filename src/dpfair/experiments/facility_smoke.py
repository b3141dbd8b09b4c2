"""The registered study ``facility-smoke`` (paper 000, facility location).

Run it with ``dpfair reproduce facility-smoke``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._facility`.
"""

from __future__ import annotations

from dpfair.experiments._facility import _FAMILIES, _REF, _SCALING_METRICS, BETA, scaling_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="facility-smoke",
    description=(
        "A small facility study (seconds): facility-scaling at n in {101, 1001}, eps in "
        "{0.5, 1}, every family, 3 reps."
    ),
    grid=[
        {"family": f, "n": n, "epsilon": e, "beta": BETA}
        for f in _FAMILIES
        for n in (101, 1001)
        for e in (0.5, 1.0)
    ],
    reps=3,
    metrics=_SCALING_METRICS,
    reference=f"{_REF}, Table 1",
)(scaling_trial)

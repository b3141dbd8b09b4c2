"""The registered study ``facility-scaling`` (paper 000, facility location).

Run it with ``dpfair reproduce facility-scaling``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._facility`.
"""

from __future__ import annotations

from dpfair.experiments._facility import (
    _FAMILIES,
    _REF,
    _SCALING_METRICS,
    BETA,
    SCALING_EPSILONS,
    SCALING_NS,
    scaling_trial,
)
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="facility-scaling",
    description=(
        "Exact 0.95-quantiles and expectations of FAIR and SWDIFF of DPExpMed (alpha* = "
        "1/(n eps)) on [0, 1] vs n in {101, ..., 10^6+1} x eps in {0.1, ..., 2}, on CTM worst "
        "cases, evenly spaced agents, a point mass and samples from single-peaked laws (one "
        "rep = one sample; deterministic families repeat), with the explicit bounds "
        "(Thm 7.9 + ineq. (7), SPM_lambda, SWDIFF corrected and paper's) and Table 1's rates."
    ),
    grid=[
        {"family": f, "n": n, "epsilon": e, "beta": BETA}
        for f in _FAMILIES
        for n in SCALING_NS
        for e in SCALING_EPSILONS
    ],
    reps=5,
    metrics=_SCALING_METRICS,
    reference=f"{_REF}, Table 1, Thm 7.9, ineq. (7); issue 3, experiment 1",
)(scaling_trial)

"""The registered study ``facility-widening`` (paper 000, facility location).

Run it with ``dpfair reproduce facility-widening``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._facility`.
"""

from __future__ import annotations

from dpfair.experiments._facility import _FAMILIES, _REF, BETA, WIDENING_CS, widening_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="facility-widening",
    description=(
        "DPExpMed with widening alpha = c/(n eps), c = 0.01 ... 100 (21 values), n = 10001, "
        "eps in {0.5, 1}: exact FAIR/SWDIFF quantiles and means per family (CTM worst case "
        "at each alpha's own level, family maximum, even spacing, point mass, samples); "
        "where the optimum sits relative to alpha* (c = 1)."
    ),
    grid=[
        {"family": f, "n": 10001, "epsilon": e, "c": c, "beta": BETA}
        for f in _FAMILIES
        for e in (0.5, 1.0)
        for c in WIDENING_CS
    ],
    reps=5,
    metrics=("fair_quantile", "swdiff_quantile", "expected_fair", "expected_swdiff"),
    reference=f"{_REF}, Cor. 7.10 (alpha* = 1/(n eps)); issue 3, experiment 2",
)(widening_trial)

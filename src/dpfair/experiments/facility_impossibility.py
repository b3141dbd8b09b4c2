"""The registered study ``facility-impossibility`` (paper 000, facility location).

Run it with ``dpfair reproduce facility-impossibility``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._facility`.
"""

from __future__ import annotations

from dpfair.experiments._facility import (
    _REF,
    IMPOSSIBILITY_EPSILONS,
    MECHANISMS,
    impossibility_trial,
)
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="facility-impossibility",
    description=(
        "Exact max over a lower-bound pair of P(FAIR >= radius) vs 1/(1 + e^(d eps)): Thm "
        "5.1's bimodal pair (radius m/2, n in {11, 100, 1001}) for DPExpMed (alpha* and 0), "
        "the Laplace median and two grid EMs (1000 candidates); Thm 7.21's D_0/D_gamma and "
        "Thm 7.24's D_1/D_2 (n = 101) for DPExpMed; eps from 0.1 to 5. Deterministic: "
        "1 rep is enough."
    ),
    grid=[
        {"pair": "thm5.1", "n": n, "epsilon": e, "mechanism": mech}
        for n in (11, 100, 1001)
        for e in IMPOSSIBILITY_EPSILONS
        for mech in MECHANISMS
    ]
    + [
        {"pair": pair, "n": 101, "epsilon": e, "mechanism": "dpexpmed"}
        for pair in ("thm7.21", "thm7.24")
        for e in IMPOSSIBILITY_EPSILONS
    ],
    reps=1,
    metrics=("max_prob", "bound", "holds"),
    reference=f"{_REF}, Thm 5.1, Thm 7.20, Thms 7.21 and 7.24; issue 3, experiment 3",
)(impossibility_trial)

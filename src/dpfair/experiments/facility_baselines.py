"""The registered study ``facility-baselines`` (paper 000, facility location).

Run it with ``dpfair reproduce facility-baselines``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._facility`.
"""

from __future__ import annotations

from dpfair.experiments._facility import _REF, BASELINE_DATASETS, BETA, MECHANISMS, baselines_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="facility-baselines",
    description=(
        "Exact E[FAIR], E[SWDIFF] and 0.95-quantiles of DPExpMed(alpha*) vs the unwidened "
        "mechanism, the Laplace median (sensitivity m) and grid EMs (rank/percentile score, "
        "1000 candidates) on the same data (n = 10001; samples, even spacing, CTM worst "
        "case, point mass, bimodal), eps in {0.1, 0.5, 1, 2}; ratios to DPExpMed."
    ),
    grid=[
        {"dataset": d, "n": 10001, "epsilon": e, "mechanism": mech, "beta": BETA}
        for d in BASELINE_DATASETS
        for e in (0.1, 0.5, 1.0, 2.0)
        for mech in MECHANISMS
    ],
    reps=5,
    metrics=("expected_fair", "expected_fair_vs_dpexpmed", "expected_swdiff_vs_dpexpmed"),
    reference=f"{_REF}, §7 baselines; issue 3, experiment 4",
)(baselines_trial)

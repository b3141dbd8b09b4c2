"""Registered studies of paper 003, federated part: FDP-Fair across S sites.

One repetition draws S site samples of the paper's simulation (seeded by the repetition's
own seed), a test set, fits :class:`dpfair.fairclass.FDPFairClassifier` through the whole
two-round protocol (the same message code path as the multi-process CLI run) and evaluates
test error and |DD| plus the *population* risk and |DD| of the released classifier (on a
fixed 200,000-draw sample of the design, through
:func:`dpfair.fairclass.federated.study.run_one`). Only public API is used.

Registered experiments
----------------------
``fdp-figure4``
    Figure 4: N_s = 2000, S ∈ {4, 5, 6}, ε ∈ {0.75, 1, 2, 3, 4, 10}, α ∈ {0.05, 0.1, 0.2,
    0.3}, δ_s = (N_s/2)^-2, the package's default rule and the paper's rule; 200 reps.
``fdp-figure5``
    Figure 5: N_total = 7200 split evenly over S ∈ {1, …, 5} sites, ε = 1, α ∈ {0.1, 0.2};
    200 reps.
``fdp-smoke``
    Seconds: S = 2, N_s = 1000, ε = 2, α = 0.2, both rules, 2 reps.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from dpfair.experiments._registry import register_experiment
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated.study import run_one

__all__ = ["fdp_grid", "fdp_trial"]

_REF = "Xue & Yu (paper 003), Algorithms 1-4 and 6"


def fdp_grid(
    sites: tuple[int, ...],
    epsilons: tuple[float, ...],
    alphas: tuple[float, ...],
    n_s: int | None = None,
    n_total: int | None = None,
    variants: tuple[str, ...] = ("default", "paper"),
    n_test: int = 2000,
) -> list[dict[str, Any]]:
    """Cells (S, N_s, ε, α, variant); with ``n_total`` the sample is split evenly over S."""
    cells = []
    for s, eps, alpha, variant in itertools.product(sites, epsilons, alphas, variants):
        per_site = n_s if n_s is not None else int(n_total or 0) // s
        cells.append({"S": s, "n_s": per_site, "epsilon": float(eps), "alpha": float(alpha),
                      "variant": variant, "n_test": n_test})
    return cells


def fdp_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, float]:
    """One FDP-Fair fit on fresh simulated sites; see the module docstring."""
    data_seed, test_seed, fit_seed = seed.spawn(3)
    site_seeds = data_seed.spawn(int(params["S"]))
    sites = [simulate(int(params["n_s"]), rng=np.random.default_rng(s)) for s in site_seeds]
    test = simulate(int(params["n_test"]), rng=np.random.default_rng(test_seed))
    out = run_one(sites, test, epsilon=float(params["epsilon"]), alpha=float(params["alpha"]),
                  variant=str(params["variant"]), seed=int(fit_seed.generate_state(1)[0]))
    out["above_alpha"] = float(out["pop_abs_dd"] > params["alpha"])
    return {k: float(v) for k, v in out.items()}


_METRICS = ("error", "abs_dd", "pop_risk", "pop_abs_dd", "above_alpha")

register_experiment(
    name="fdp-figure4",
    description=(
        "Figure 4: FDP-Fair with N_s = 2000 per site, S in {4, 5, 6}, eps in {0.75, 1, 2, 3, "
        "4, 10} (delta_s = (N_s/2)^-2), alpha in {0.05, 0.1, 0.2, 0.3}; default (confidence) "
        "and paper threshold rules; test and population error / |DD|."
    ),
    grid=fdp_grid((4, 5, 6), (0.75, 1.0, 2.0, 3.0, 4.0, 10.0), (0.05, 0.1, 0.2, 0.3),
                  n_s=2000),
    reps=200,
    metrics=_METRICS,
    reference=f"{_REF}; §5.1, Figure 4; issue 5",
)(fdp_trial)

register_experiment(
    name="fdp-figure5",
    description=(
        "Figure 5: effect of the number of sites, N_total = 7200 split over S in {1, ..., 5}, "
        "eps = 1, alpha in {0.1, 0.2}; default and paper rules."
    ),
    grid=fdp_grid((1, 2, 3, 4, 5), (1.0,), (0.1, 0.2), n_total=7200, n_test=2500),
    reps=200,
    metrics=_METRICS,
    reference=f"{_REF}; §5.1, Figure 5; issue 5",
)(fdp_trial)

register_experiment(
    name="fdp-smoke",
    description="Seconds: S = 2, N_s = 1000, eps = 2, alpha = 0.2, both rules, 2 reps.",
    grid=fdp_grid((2,), (2.0,), (0.2,), n_s=1000, n_test=1000),
    reps=2,
    metrics=_METRICS,
    reference=_REF,
)(fdp_trial)

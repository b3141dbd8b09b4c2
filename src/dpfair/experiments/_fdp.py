"""Trials and grids of the studies of paper 003, federated part: FDP-Fair across S sites.

One repetition draws S site samples of the paper's simulation (seeded by the repetition's
own seed), a test set, fits :class:`dpfair.fairclass.FDPFairClassifier` through the whole
two-round protocol (the same message code path as the multi-process CLI run) and evaluates
test error and |DD| plus the *population* risk and |DD| of the released classifier (on a
fixed 200,000-draw sample of the design, through
:func:`dpfair.experiments._fdp_paper.run_one`). Only public API is used.

Registered experiments
----------------------
Each is registered by its own module of :mod:`dpfair.experiments`, named after it
(``my-study`` in ``my_study.py``).

``fdp-figure4``
    Figure 4: N_s = 2000, S ∈ {4, 5, 6}, ε ∈ {0.75, 1, 2, 3, 4, 10}, α ∈ {0.05, 0.1, 0.2,
    0.3}, δ_s = (N_s/2)^-2, the package's default rule and the paper's rule; 200 reps.
``fdp-figure5``
    Figure 5: N_total = 7200 split evenly over S ∈ {1, …, 5} sites, ε = 1, α ∈ {0.1, 0.2};
    200 reps.
``fdp-sensitivity``
    §A.2: S = 3, N_s = 2000, ε = 1, α = 0.3, both rules; ρ ∈ {0, 0.01, 0.02, 0.03, 0.05,
    0.08} at C_ω = 0.1, and C_ω ∈ {0.01, 0.05, 0.1, 0.2, 0.5} at ρ = 0.03; 200 reps.
``fdp-adult``, ``fdp-law``
    Real-data panels with S = 1: a random 70/30 split per repetition (shared by all cells),
    ε = 1, ρ = 0.02, α ∈ {0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35}, both rules; test
    error and |DD| only (no population). Adult is the bundled copy (or
    ``$DPFAIR_ADULT_PATH``); Law School is read from ``$DPFAIR_LAW_SCHOOL_PATH`` (not
    bundled).
``fdp-smoke``
    Seconds: S = 2, N_s = 1000, ε = 2, α = 0.2, both rules, 2 reps.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from dpfair.experiments._fairclass import DATASET_CODES, data_seed, load_dataset
from dpfair.experiments._fdp_paper import run_one
from dpfair.fairclass.datasets import simulate, train_test_split

__all__ = ["fdp_grid", "fdp_real_trial", "fdp_trial", "real_grid", "sensitivity_grid"]

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


def sensitivity_grid(
    rhos: tuple[float, ...] = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08),
    c_omegas: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2, 0.5),
    variants: tuple[str, ...] = ("default", "paper"),
    *,
    n_s: int = 2000,
    sites: int = 3,
    epsilon: float = 1.0,
    alpha: float = 0.3,
) -> list[dict[str, Any]]:
    """Cells of §A.2: ρ swept at C_ω = 0.1, then C_ω swept at ρ = 0.03, per variant."""
    base = {"S": sites, "n_s": n_s, "epsilon": float(epsilon), "alpha": float(alpha),
            "n_test": 2000}
    cells = []
    for variant in variants:
        cells += [{**base, "variant": variant, "what": "rho", "rho": float(r), "c_omega": 0.1}
                  for r in rhos]
        cells += [{**base, "variant": variant, "what": "c_omega", "rho": 0.03,
                   "c_omega": float(c)} for c in c_omegas]
    return cells


def real_grid(
    dataset: str,
    alphas: tuple[float, ...] = (0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35),
    variants: tuple[str, ...] = ("default", "paper"),
    *,
    epsilon: float = 1.0,
    rho: float = 0.02,
    test_fraction: float = 0.3,
) -> list[dict[str, Any]]:
    """Cells (α, variant) of a real-data panel with one site."""
    return [{"dataset": dataset, "epsilon": float(epsilon), "alpha": float(a),
             "variant": v, "rho": float(rho), "test_fraction": float(test_fraction)}
            for a in alphas for v in variants]


def fdp_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, float]:
    """One FDP-Fair fit on fresh simulated sites; see the module docstring.

    ``rho`` and ``c_omega`` (the band and the ω constant) default to the protocol's 0.03
    and 0.1 when the cell does not set them (the sensitivity study does).
    """
    data_seed, test_seed, fit_seed = seed.spawn(3)
    site_seeds = data_seed.spawn(int(params["S"]))
    sites = [simulate(int(params["n_s"]), rng=np.random.default_rng(s)) for s in site_seeds]
    test = simulate(int(params["n_test"]), rng=np.random.default_rng(test_seed))
    out = run_one(sites, test, epsilon=float(params["epsilon"]), alpha=float(params["alpha"]),
                  variant=str(params["variant"]), seed=int(fit_seed.generate_state(1)[0]),
                  rho=float(params.get("rho", 0.03)),
                  c_omega=float(params.get("c_omega", 0.1)))
    out["above_alpha"] = float(out["pop_abs_dd"] > params["alpha"])
    return {k: float(v) for k, v in out.items()}


def fdp_real_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, float]:
    """One FDP-Fair fit with S = 1 on a random split of a real data set.

    The split is ``train_test_split(data, test_fraction, rng=data_seed(seed, code))`` — the
    same stream the single-server real-data studies use, so every cell of one repetition
    sees the same split; the fit's ``random_state`` comes from ``seed``.
    """
    dataset = str(params["dataset"])
    data = load_dataset(dataset)
    split = np.random.default_rng(data_seed(seed, DATASET_CODES[dataset]))
    train, test = train_test_split(data, float(params["test_fraction"]), split)
    out = run_one([train], test, epsilon=float(params["epsilon"]),
                  alpha=float(params["alpha"]), variant=str(params["variant"]),
                  seed=int(seed.generate_state(1)[0]), rho=float(params["rho"]),
                  population=False)
    out["above_alpha"] = float(out["abs_dd"] > params["alpha"])
    return {k: float(v) for k, v in out.items()}


_METRICS = ("error", "abs_dd", "pop_risk", "pop_abs_dd", "above_alpha")

_REAL_METRICS = ("error", "abs_dd", "above_alpha")

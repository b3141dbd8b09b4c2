"""Data for fair classification: the paper's simulation with its oracle, Adult, Law School.

The designs and loaders live in :mod:`dpfair.data.designs` (the data layer owns all
reading) and are re-exported here; :func:`simulation_oracle` stays here because it solves
the fair-Bayes threshold exactly (:func:`~dpfair.fairclass.exact_fair_threshold`).

* :func:`simulate` — the simulation design of Xue & Yu (paper 003, §5.1.1) as restated in
  ALGORITHMS.md §C; :func:`simulation_eta` is its true regression function and
  :func:`simulation_oracle` computes the oracle (Bayes and fair-Bayes) risks from a large
  sample of our own.
* :func:`simulate_many_features` — the many-feature design of issue 19 (d standard-normal
  features in the public box [−4, 4], a linear η), for the linear group score.
* :func:`load_adult`, :func:`load_law_school` — the two real data sets of §5.2 from a path,
  with *public* feature bounds; :func:`load_bundled_adult` — the Adult copy shipped inside
  the package (``data/bundled/adult_xue_yu.csv.gz``, CC BY 4.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_positive_int
from dpfair.data.designs import (
    ADULT_BOUNDS,
    LAW_SCHOOL_BOUNDS,
    SIMULATION_BOUNDS,
    SIMULATION_PAPER_ORACLE,
    FairnessDataset,
    bundled_adult_path,
    load_adult,
    load_bundled_adult,
    load_law_school,
    simulate,
    simulation_eta,
    train_test_split,
)
from dpfair.fairclass._threshold import dd_steps, exact_fair_threshold

__all__ = [
    "ADULT_BOUNDS",
    "LAW_SCHOOL_BOUNDS",
    "SIMULATION_BOUNDS",
    "SIMULATION_PAPER_ORACLE",
    "FairnessDataset",
    "SimulationOracle",
    "bundled_adult_path",
    "load_adult",
    "load_bundled_adult",
    "load_law_school",
    "simulate",
    "simulate_many_features",
    "simulation_eta",
    "simulation_oracle",
    "train_test_split",
]


@dataclass(frozen=True)
class SimulationOracle:
    """Oracle quantities of the simulation design, from a large sample.

    Attributes
    ----------
    n : int
        Monte Carlo sample size.
    bayes_risk : float
        Risk of the unconstrained (group-wise) Bayes classifier 1{η_a(x) ≥ 1/2}.
    bayes_dd : float
        Its demographic disparity P(Ŷ=1 | A=1) − P(Ŷ=1 | A=0).
    fair_risk : dict of float to float
        Risk of the fair-Bayes classifier (paper Eq. 2) by α.
    fair_tau : dict of float to float
        Its threshold τ* by α.
    fair_dd : dict of float to float
        Its disparity by α.
    """

    n: int
    bayes_risk: float
    bayes_dd: float
    fair_risk: dict[float, float]
    fair_tau: dict[float, float]
    fair_dd: dict[float, float]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "n": self.n,
            "bayes_risk": self.bayes_risk,
            "bayes_dd": self.bayes_dd,
            "fair_risk": {str(k): v for k, v in self.fair_risk.items()},
            "fair_tau": {str(k): v for k, v in self.fair_tau.items()},
            "fair_dd": {str(k): v for k, v in self.fair_dd.items()},
        }


def simulation_oracle(
    alphas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.4),
    *,
    n: int = 2_000_000,
    rng: RandomLike = 20_240_611,
    p_a: float = 0.3,
) -> SimulationOracle:
    """Oracle risks of the simulation design by large-sample simulation.

    The risks are computed as E[f(1 − η) + (1 − f)η] over a sample of (X, A) — Y is
    integrated out exactly — and the fair-Bayes threshold τ* = argmin{|τ| : |DD(τ)| ≤ α}
    is found exactly on the sample's step function with the true η and π (paper Eq. 2).
    With n = 2·10^6 the Monte Carlo standard error of each risk is below 3·10^-4.
    """
    m = check_positive_int("n", n)
    gen = as_generator(rng)
    data = simulate(m, gen, p_a=p_a)
    eta = simulation_eta(data.X, data.A)
    A = data.A
    pi = np.array([1.0 - p_a, p_a])

    def risk_dd(pred: NDArray[np.bool_]) -> tuple[float, float]:
        risk = float(np.mean(np.where(pred, 1.0 - eta, eta)))
        dd = float(pred[A == 1].mean() - pred[A == 0].mean())
        return risk, dd

    bayes_risk, bayes_dd = risk_dd(eta >= 0.5)
    z = 2.0 * (2.0 * A - 1.0) * pi[A] * (eta - 0.5)
    steps = dd_steps(z[A == 1], z[A == 0])
    fair_risk: dict[float, float] = {}
    fair_tau: dict[float, float] = {}
    fair_dd: dict[float, float] = {}
    for alpha in alphas:
        tau = exact_fair_threshold(steps, float(alpha)).tau
        pred = np.where(A == 1, z >= tau, z <= tau)
        r, d = risk_dd(pred)
        fair_risk[float(alpha)] = r
        fair_tau[float(alpha)] = tau
        fair_dd[float(alpha)] = d
    return SimulationOracle(m, bayes_risk, bayes_dd, fair_risk, fair_tau, fair_dd)


#: The public feature box of :func:`simulate_many_features` (per feature).
MANY_FEATURES_BOX = (-4.0, 4.0)


def simulate_many_features(
    n: int, rng: RandomLike = None, *, d: int = 20
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int8]]:
    """(X, y, A) of the many-feature design (issue 19; synthetic, no real data).

    A ~ Bern(1/2); X = clip(Z + 0.5(2A − 1)·e₁, −4, 4) with Z ~ N(0, I_d) (the group shifts
    the first feature); η(x, a) = sigmoid(1.5·Σ_j x_j/√d + 0.5(2a − 1)), Y ~ Bern(η). The
    public box is [−4, 4] per feature (:data:`MANY_FEATURES_BOX`).
    """
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    gen = as_generator(rng)
    A = (gen.uniform(size=n) < 0.5).astype(np.int8)
    X = gen.normal(size=(n, d))
    X[:, 0] += 0.5 * (2 * A - 1)
    X = np.clip(X, *MANY_FEATURES_BOX)
    logit = 1.5 * X.sum(axis=1) / np.sqrt(d) + 0.5 * (2 * A - 1)
    y = (gen.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return X, y, A

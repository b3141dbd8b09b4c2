"""The decision rule every released plug-in fold shares (paper 003, Eq. 2).

A fold releases η̃_a (on a grid, as logistic coefficients, or as RFF sums) and π̃_a; its
score Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2) and decision 1{Z ≥ τ} (group 1) / 1{Z ≤ τ}
(group 0) are post-processing of the release: no data, no noise. A private S2 draws and
certifies τ̂ on scores rounded to a public lattice; the decision then reads the score
rounded the same way (``decide(score_bins=)``), so the classifier is the one certified.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair.fairclass._threshold import snap_scores

__all__ = ["CONSTRAINTS", "OpportunityFold", "PlugInRule", "opportunity_scores"]


class PlugInRule(abc.ABC):
    """Mixin: ``scores`` and ``decide`` from the fold's ``eta_at``, ``pi`` and ``tau``."""

    pi: NDArray[np.float64]
    tau: float

    @abc.abstractmethod
    def eta_at(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """η̃_{A_i}(U_i) (each fold type defines it)."""

    def scores(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2)."""
        eta = self.eta_at(grid, U, A)
        sign = 2.0 * A.astype(np.float64) - 1.0
        return 2.0 * sign * self.pi[A.astype(np.intp)] * (eta - 0.5)

    def decide(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8],
               score_bins: int | None = None) -> NDArray[np.int8]:
        """1{Z ≥ τ} for group 1 and 1{Z ≤ τ} for group 0 (paper Eq. 2).

        ``score_bins``: B of the public score lattice S2 drew and certified τ̂ on (the
        private fits round every calibration score with :func:`snap_scores`); the decision
        then reads the score rounded the same way, so the released classifier is the one
        whose disparity curve S2 estimated and certified. Deciding on the raw score instead
        differs from it by the scores within half a lattice cell of τ̂, which the certified
        rule's windowed aim puts τ̂ next to: a raw atom just above a lattice point was
        counted positive by the classifier and negative by the certificate
        (``tests/attacks/test_today3_side_lattice.py``). None: the raw score (non-private
        S2, exact on raw scores).
        """
        z = self.scores(grid, U, A)
        if score_bins is not None:
            z = snap_scores(z, score_bins)
        return np.where(A == 1, z >= self.tau, z <= self.tau).astype(np.int8)


#: The fairness constraints of S2 (Fairlearn's keywords).
CONSTRAINTS = ("demographic_parity", "equal_opportunity")

#: η below this floor is read as this floor in the equal-opportunity score (1/η finite).
_ETA_FLOOR = 1e-12


def opportunity_scores(
    eta: NDArray[np.float64], A: NDArray[np.int8], positive: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Z = (2a − 1)·p̃_{a,1}·(2 − 1/η̃_a(x)), clipped to [−1, 1] (equal opportunity).

    The fair-Bayes rule under equal opportunity (Zeng, Cheng & Dobriban 2024) predicts 1
    iff η_a(x) > 1/(2 − λ(2a − 1)/p_{a,1}), p_{a,1} = P(A = a, Y = 1): a group-wise
    threshold with one scalar λ. Rearranged, group 1 predicts 1 iff Z ≥ λ and group 0 iff
    Z ≤ λ with this Z — the decision form of :meth:`PlugInRule.decide` with τ = λ. Every
    τ ∈ (−1, 1) decides alike on the clipped and the raw score; the certified rule draws
    τ̂ from [−r, r] with r = max_a p̃_{a,1} < 1 (the crossing of any target lies there:
    at τ = p_{1,1} group 1 predicts nothing, at τ = −p_{0,1} group 0 nothing).
    """
    g = 2.0 - 1.0 / np.maximum(np.asarray(eta, dtype=np.float64), _ETA_FLOOR)
    a = A.astype(np.intp)
    sign = 2.0 * A.astype(np.float64) - 1.0
    return np.clip(sign * np.asarray(positive, dtype=np.float64)[a] * g, -1.0, 1.0)


class OpportunityFold(PlugInRule):
    """A released fold under equal opportunity: the S1 fold's η̃, the released p̃_{a,1}
    (from the calibration half's private counts, S2) and the threshold τ̂.

    Post-processing of released numbers only. Attributes other than ``positive``,
    ``tau`` and ``scores`` are the S1 fold's (``eta``, ``theta``, ``pi``, …).
    """

    def __init__(self, base: Any, positive: NDArray[np.float64], tau: float) -> None:
        self.base = base
        self.positive = np.asarray(positive, dtype=np.float64)
        self.tau = float(tau)
        #: π̃ of the S1 fold (reported; not part of the equal-opportunity score).
        self.pi = np.asarray(base.pi, dtype=np.float64)

    def __getattr__(self, name: str) -> Any:
        if name in ("base", "positive", "tau", "pi"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def eta_at(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        return np.asarray(self.base.eta_at(grid, U, A), dtype=np.float64)

    def scores(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """The equal-opportunity score (:func:`opportunity_scores`)."""
        return opportunity_scores(self.eta_at(grid, U, A), A, self.positive)

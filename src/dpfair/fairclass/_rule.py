"""The decision rule every released plug-in fold shares (paper 003, Eq. 2).

A fold releases η̃_a (on a grid, as logistic coefficients, or as RFF sums) and π̃_a; its
score Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2) and decision 1{Z ≥ τ} (group 1) / 1{Z ≤ τ}
(group 0) are post-processing of the release: no data, no noise.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["PlugInRule"]


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

    def decide(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.int8]:
        """1{Z ≥ τ} for group 1 and 1{Z ≤ τ} for group 0 (paper Eq. 2)."""
        z = self.scores(grid, U, A)
        return np.where(A == 1, z >= self.tau, z <= self.tau).astype(np.int8)

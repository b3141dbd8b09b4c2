"""η̃ from released cell sums: the regularised ratio (post-processing of S1)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["eta_from_sums"]


def eta_from_sums(
    sums: NDArray[np.float64], ridge: float | NDArray[np.float64] = 0.0
) -> NDArray[np.float64]:
    """η̃_a on the grid from (noisy) cell sums; shape ``grid.shape + (2,)``.

    η̃ = (G⁺ + λ/2) / (G⁺ + H⁺ + λ) with G = F_{a,1}, H = F_{a,0}, x⁺ = max(x, 0) and
    λ = ``ridge`` ≥ 0 (a number, or one per group a: shape (2,); 1/2 where the denominator
    is 0). With noise, λ = RIDGE·σ_f shrinks η̃
    towards 1/2 where the estimated density is small compared with the noise, instead of
    dividing noise by noise. Always in [0, 1]; a pure post-processing.
    """
    g = np.maximum(sums[..., 1], 0.0)
    s = g + np.maximum(sums[..., 0], 0.0)
    num = g + 0.5 * ridge
    den = s + ridge
    with np.errstate(invalid="ignore", divide="ignore"):
        eta = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)
    return np.clip(eta, 0.0, 1.0)

"""Result objects returned by :mod:`dpfair.median`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair.privacy import Budget

__all__ = ["DPCdf", "MedianInterval", "NonPrivateInterval"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


@dataclass(frozen=True, eq=False)
class DPCdf:
    """A differentially private empirical CDF on a grid (free post-processing).

    Attributes
    ----------
    grid : ndarray of shape (2^D + 1,)
        Grid points over the public range.
    values : ndarray of shape (2^D + 1,)
        Estimated fraction of records ≤ each grid point (Honaker-consistent, not clipped
        to [0, 1] or made monotone: those would be further post-processing). ``values[0]``
        is 0 by construction: records sitting exactly on the lower bound are counted in the
        first bin, i.e. from ``grid[1]`` on.
    std : ndarray of shape (2^D + 1,)
        Exact standard deviation of each value (the estimate is unbiased and Gaussian).
    """

    grid: NDArray[np.float64]
    values: NDArray[np.float64]
    std: NDArray[np.float64]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"grid": self.grid.tolist(), "values": self.values.tolist(),
                "std": self.std.tolist()}


@dataclass(frozen=True, eq=False)
class MedianInterval:
    """A differentially private confidence interval for the population median.

    Attributes
    ----------
    low, high : float
        The interval; P(med(P) ∈ [low, high]) ≥ 1 − alpha for every continuous population
        whose median lies in the public range (probability over sample and mechanism).
    estimate : float
        Point estimate: the interval's midpoint (post-processing, no extra budget).
    method : str
        ``"expmech"``, ``"cdf"``, ``"binsearch"`` or ``"binsearch_cdf"``.
    alpha : float
        Nominal miscoverage.
    n : int
        Number of records (public under replace-one neighbours).
    bounds : tuple of float
        The public range R.
    granularity : float
        The granularity θ used.
    privacy : Budget
        The budget actually spent (zCDP), from the method's accountant.
    diagnostics : dict
        Method details: target ranks, per-release budgets, tree depth, noise scales...
    cdf : DPCdf or None
        The DP CDF computed by the ``"cdf"`` method (``None`` for the others).
    """

    low: float
    high: float
    estimate: float
    method: str
    alpha: float
    n: int
    bounds: tuple[float, float]
    granularity: float
    privacy: Budget
    diagnostics: dict[str, Any] = field(default_factory=dict)
    cdf: DPCdf | None = None

    @property
    def width(self) -> float:
        """high − low."""
        return self.high - self.low

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in [low, high]."""
        return bool(self.low <= value <= self.high)

    def to_dict(self, *, include_cdf: bool = False) -> dict[str, Any]:
        """JSON-ready dict (the DP CDF only when asked for)."""
        out: dict[str, Any] = {
            "low": self.low,
            "high": self.high,
            "estimate": self.estimate,
            "method": self.method,
            "alpha": self.alpha,
            "n": self.n,
            "bounds": list(self.bounds),
            "granularity": self.granularity,
            "privacy": self.privacy.to_dict(),
            "diagnostics": _jsonable(self.diagnostics),
        }
        if include_cdf and self.cdf is not None:
            out["cdf"] = self.cdf.to_dict()
        return out

    def __repr__(self) -> str:
        return (
            f"MedianInterval(low={self.low:.6g}, high={self.high:.6g}, "
            f"estimate={self.estimate:.6g}, method={self.method!r}, alpha={self.alpha:g}, "
            f"n={self.n}, privacy={self.privacy})"
        )


@dataclass(frozen=True)
class NonPrivateInterval:
    """The classical distribution-free interval [x_(k_low), x_(k_high)] (not private).

    Attributes
    ----------
    low, high : float
        Order statistics at ranks ``k_low`` and ``k_high`` (1-based).
    estimate : float
        The sample median.
    k_low, k_high : int
        Exact binomial ranks: P(med < x_(k_low)) = P(B ≤ k_low − 1) ≤ alpha/2 and
        P(med > x_(k_high)) = P(B ≥ k_high) ≤ alpha/2, B ~ Bin(n, 1/2).
    alpha : float
    n : int
    """

    low: float
    high: float
    estimate: float
    k_low: int
    k_high: int
    alpha: float
    n: int

    @property
    def width(self) -> float:
        """high − low."""
        return self.high - self.low

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"low": self.low, "high": self.high, "estimate": self.estimate,
                "k_low": self.k_low, "k_high": self.k_high, "alpha": self.alpha,
                "n": self.n, "private": False}

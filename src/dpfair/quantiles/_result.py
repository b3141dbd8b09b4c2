"""Result objects returned by :mod:`dpfair.quantiles`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair.median._result import DPCdf, _jsonable
from dpfair.privacy import Budget

__all__ = ["CdfBand", "QuantileInterval", "QuantileIntervals"]


@dataclass(frozen=True, eq=False)
class QuantileInterval:
    """A differentially private confidence interval for one population quantile.

    Attributes
    ----------
    low, high : float
        The interval; P(x_q ∈ [low, high]) ≥ 1 − alpha for every population whose
        q-quantile x_q = inf{x : F(x) ≥ q} lies in the public range (probability over the
        sample and the mechanism). For the intervals of
        :func:`~dpfair.quantiles.confidence_intervals` the coverage is simultaneous.
    estimate : float
        The midpoint (post-processing).
    q : float
        The quantile level.
    method : str
    alpha : float
        Nominal miscoverage of this interval (for a simultaneous family: the family's α).
    n : int
    bounds : tuple of float
        The public range R.
    granularity : float
        The granularity of the final stage (the localised grid step when localised).
    privacy : Budget
        What this interval spent (for a family sharing one release: the family's total).
    diagnostics : dict
        Target ranks, localisation stage, noise scales, ledger...
    cdf : DPCdf or None
        The DP CDF released by the tree methods.
    warnings : tuple of str
        Free (post-processing) warnings: an end on a public bound, little privacy left,
        a grid coarse relative to the interval.
    """

    low: float
    high: float
    estimate: float
    q: float
    method: str
    alpha: float
    n: int
    bounds: tuple[float, float]
    granularity: float
    privacy: Budget
    diagnostics: dict[str, Any] = field(default_factory=dict)
    cdf: DPCdf | None = None
    warnings: tuple[str, ...] = ()

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
            "low": self.low, "high": self.high, "estimate": self.estimate, "q": self.q,
            "method": self.method, "alpha": self.alpha, "n": self.n,
            "bounds": list(self.bounds), "granularity": self.granularity,
            "privacy": self.privacy.to_dict(), "diagnostics": _jsonable(self.diagnostics),
            "warnings": list(self.warnings),
        }
        if include_cdf and self.cdf is not None:
            out["cdf"] = self.cdf.to_dict()
        return out

    def __repr__(self) -> str:
        return (
            f"QuantileInterval(q={self.q:g}, low={self.low:.6g}, high={self.high:.6g}, "
            f"method={self.method!r}, alpha={self.alpha:g}, n={self.n}, "
            f"privacy={self.privacy})"
        )


@dataclass(frozen=True, eq=False)
class QuantileIntervals:
    """Intervals for several quantiles with simultaneous coverage ≥ 1 − alpha.

    Attributes
    ----------
    intervals : tuple of QuantileInterval
        One per requested level, in the order requested.
    privacy : Budget
        Total budget spent by the family (ρ-zCDP).
    alpha : float
        Simultaneous miscoverage: P(some x_q ∉ its interval) ≤ alpha.
    method : str
    cdf : DPCdf or None
        The DP CDF of the shared tree release (tree methods).
    diagnostics : dict
    """

    intervals: tuple[QuantileInterval, ...]
    privacy: Budget
    alpha: float
    method: str
    cdf: DPCdf | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.intervals)

    def __iter__(self) -> Any:
        return iter(self.intervals)

    def __getitem__(self, i: int) -> QuantileInterval:
        return self.intervals[i]

    @property
    def qs(self) -> tuple[float, ...]:
        """The quantile levels, in order."""
        return tuple(iv.q for iv in self.intervals)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every interval's free warnings (deduplicated, in order)."""
        seen: dict[str, None] = {}
        for iv in self.intervals:
            for w in iv.warnings:
                seen.setdefault(w, None)
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"intervals": [iv.to_dict() for iv in self.intervals],
                "privacy": self.privacy.to_dict(), "alpha": self.alpha,
                "method": self.method, "diagnostics": _jsonable(self.diagnostics)}


@dataclass(frozen=True, eq=False)
class CdfBand:
    """A DP CDF with a simultaneous (1 − alpha) band for the population CDF on a grid.

    Attributes
    ----------
    grid : ndarray of shape (m,)
        Public grid points.
    values : ndarray of shape (m,)
        DP estimate of the empirical CDF at the grid (post-processed: clipped to [0, 1]
        and made monotone).
    lower, upper : ndarray of shape (m,)
        P(lower(t) ≤ F(t) ≤ upper(t) for every grid point t) ≥ 1 − alpha. Both are
        monotone, so the band also holds between grid points in the sense
        lower(g_j) ≤ F(t) ≤ upper(g_{j+1}) for g_j ≤ t ≤ g_{j+1}.
    alpha : float
    n : int
    privacy : Budget
    diagnostics : dict
    """

    grid: NDArray[np.float64]
    values: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    alpha: float
    n: int
    privacy: Budget
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def contains(self, cdf_values: NDArray[np.float64]) -> bool:
        """Whether a CDF evaluated at ``grid`` lies inside the band everywhere."""
        v = np.asarray(cdf_values, dtype=np.float64)
        return bool(np.all((self.lower <= v) & (v <= self.upper)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"grid": self.grid.tolist(), "values": self.values.tolist(),
                "lower": self.lower.tolist(), "upper": self.upper.tolist(),
                "alpha": self.alpha, "n": self.n, "privacy": self.privacy.to_dict(),
                "diagnostics": _jsonable(self.diagnostics)}

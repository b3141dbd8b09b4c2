"""Exact output laws of facility-location mechanisms, with exact FAIR and SWDIFF laws.

Every law here answers, exactly (up to floating-point rounding) and without Monte Carlo:
P(FAIR > r), P(FAIR ≥ r), P(SWDIFF > s), their quantiles, E[FAIR] and E[SWDIFF].

How
---
FAIR = |L − T| and, on each side of T, SWDIFF is a continuous non-decreasing piecewise-
linear function of r = |L − T| with knots at the agents' distances from T (closed form
of :mod:`dpfair.facility._metrics`). Hence

* P(FAIR > r) = P(L < T − r) + P(L > T + r);
* P(SWDIFF > s) = P(L < T − r_L(s)) + P(L > T + r_R(s)) with r_side(s) the largest r whose
  SWDIFF on that side is ≤ s (the inverse of a monotone piecewise-linear map);
* E[g(|L − T|)] for g linear on each segment [r_j, r_{j+1}) is Σ_j a_j·E[r; seg j] +
  b_j·P(seg j), and each law supplies those segment moments exactly: the piecewise-
  constant law of DPExpMed integrates r·density over the merge of its breakpoints with
  the knots (O(n) after sorting: both lists are sorted, and a stable sort of two sorted
  runs is a linear-time merge); the clipped discrete Laplace law has closed-form moments; a
  discrete law sums over its atoms.

Quantiles are found by bisection on the exact tail function down to adjacent floating-
point numbers, so they are exact to machine precision.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike
from dpfair.facility._metrics import Profile, loss_cap
from dpfair.mechanisms import ClippedDiscreteLaplaceLaw, DiscreteLaw, PiecewiseConstantLaw

__all__ = [
    "FacilityDistribution",
    "GridDistribution",
    "LaplaceDistribution",
    "MetricSummary",
    "OutputDistribution",
]


def _merge_sorted(
    a: NDArray[np.float64], b: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.intp]]:
    """Merge two ascending arrays; also return how many of each are at or before every slot.

    A stable sort of the concatenation is timsort on two sorted runs, i.e. a linear merge.
    """
    z = np.concatenate((a, b))
    order = np.argsort(z, kind="stable")
    from_a = order < a.size
    return z[order], np.cumsum(from_a), np.cumsum(~from_a)


def _levels(level: ArrayLike, name: str = "level") -> tuple[NDArray[np.float64], bool]:
    arr = np.asarray(level, dtype=np.float64)
    if np.any(~np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise InvalidParameterError(f"{name}={level!r}: must lie in [0, 1].")
    return np.atleast_1d(arr).ravel(), arr.ndim == 0


def _smallest_with_tail_at_most(
    tail: Any, beta: NDArray[np.float64], upper: float
) -> NDArray[np.float64]:
    """For each b: the smallest v in [0, upper] with tail(v) ≤ b (tail non-increasing).

    Bisection down to adjacent floating-point numbers; ``tail(upper)`` must be 0.
    """
    lo = np.zeros(beta.size)
    hi = np.full(beta.size, float(upper))
    done = np.asarray(tail(lo) <= beta)
    hi[done] = 0.0
    for _ in range(2200):
        active = ~done & (np.nextafter(lo, np.inf) < hi)
        if not active.any():
            break
        mid = 0.5 * (lo + hi)
        ok = np.asarray(tail(mid) <= beta)
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid, lo)
    return hi


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Exact FAIR/SWDIFF summaries of one mechanism on one data set.

    Attributes
    ----------
    expected_fair, expected_swdiff : float
        E[FAIR], E[SWDIFF].
    level : float
        Quantile level 1 − β.
    fair_quantile, swdiff_quantile : float
        (1 − β)-quantiles.
    """

    expected_fair: float
    expected_swdiff: float
    level: float
    fair_quantile: float
    swdiff_quantile: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (JSON-ready)."""
        return {
            "expected_fair": self.expected_fair,
            "expected_swdiff": self.expected_swdiff,
            "level": self.level,
            "fair_quantile": self.fair_quantile,
            "swdiff_quantile": self.swdiff_quantile,
        }


class OutputDistribution(ABC):
    """Common exact FAIR/SWDIFF machinery for a location law on a public domain.

    Subclasses provide the law's one-sided probabilities and its segment moments in
    r = |L − T|; everything about FAIR and SWDIFF follows (module docstring).
    """

    profile: Profile
    domain: tuple[float, float]

    # ------------------------------------------------------------------ law interface
    @abstractmethod
    def _below(self, t: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        """P(L < t) (strict) or P(L ≤ t)."""

    @abstractmethod
    def _above(self, t: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        """P(L > t) (strict) or P(L ≥ t)."""

    @abstractmethod
    def _side_moments(
        self, side: str, knots: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per segment j of ``knots`` (ascending, knots[0] = 0, last segment unbounded):
        P(L on ``side`` with r in segment j) and E[r; same event], r = |L − T|."""

    @abstractmethod
    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L ≤ t)."""

    @abstractmethod
    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L > t)."""

    @abstractmethod
    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: RandomLike = None
    ) -> NDArray[np.float64] | float:
        """Exact draws of the location."""

    @abstractmethod
    def mean(self) -> float:
        """E[L]."""

    # ------------------------------------------------------------------ basic facts
    @property
    def optimum(self) -> float:
        """T(D): the optimal (median) location the metrics are measured from."""
        return self.profile.optimum

    @property
    def n(self) -> int:
        """Number of agents."""
        return self.profile.n

    @property
    def _fair_max(self) -> float:
        lo, hi = self.domain
        return max(self.optimum - lo, hi - self.optimum, 0.0)

    @cached_property
    def _swdiff_max(self) -> float:
        lo, hi = self.domain
        t = self.optimum
        vals = [
            float(self.profile.swdiff_side("left", np.asarray(max(t - lo, 0.0)))),
            float(self.profile.swdiff_side("right", np.asarray(max(hi - t, 0.0)))),
        ]
        return max(max(vals), 0.0)

    # ------------------------------------------------------------------ FAIR
    def fair_sf(self, r: ArrayLike, *, inclusive: bool = False) -> Any:
        """P(FAIR > r), or P(FAIR ≥ r) with ``inclusive=True``; FAIR = |L − T|."""
        rr = np.asarray(r, dtype=np.float64)
        t = self.optimum
        if inclusive:
            out = self._below(t - rr, strict=False) + self._above(t + rr, strict=False)
            out = np.where(rr <= 0, 1.0, out)
        else:
            out = self._below(t - rr, strict=True) + self._above(t + rr, strict=True)
            out = np.where(rr < 0, 1.0, out)
        out = np.clip(out, 0.0, 1.0)
        return float(out) if out.ndim == 0 else out

    def fair_cdf(self, r: ArrayLike) -> Any:
        """P(FAIR ≤ r)."""
        out = 1.0 - np.asarray(self.fair_sf(r))
        return float(out) if out.ndim == 0 else out

    def fair_quantile(self, level: ArrayLike) -> Any:
        """Smallest r with P(FAIR ≤ r) ≥ ``level`` (exact to machine precision)."""
        lev, scalar = _levels(level)
        out = _smallest_with_tail_at_most(
            lambda v: np.asarray(self.fair_sf(v)), 1.0 - lev, self._fair_max
        )
        return float(out[0]) if scalar else out

    def expected_fair(self) -> float:
        """E[FAIR] = E|L − T|, exactly."""
        zero = np.zeros(1)
        total = 0.0
        for side in ("left", "right"):
            _, m1 = self._side_moments(side, zero)
            total += float(np.sum(m1))
        return total

    # ------------------------------------------------------------------ SWDIFF
    def swdiff_sf(self, s: ArrayLike) -> Any:
        """P(SWDIFF > s), exactly."""
        ss = np.asarray(s, dtype=np.float64)
        sp = np.maximum(ss, 0.0)
        t = self.optimum
        r_left = self.profile.swdiff_inverse("left", sp)
        r_right = self.profile.swdiff_inverse("right", sp)
        out = self._below(t - r_left, strict=True) + self._above(t + r_right, strict=True)
        out = np.clip(np.where(ss < 0, 1.0, out), 0.0, 1.0)
        return float(out) if out.ndim == 0 else out

    def swdiff_cdf(self, s: ArrayLike) -> Any:
        """P(SWDIFF ≤ s)."""
        out = 1.0 - np.asarray(self.swdiff_sf(s))
        return float(out) if out.ndim == 0 else out

    def swdiff_quantile(self, level: ArrayLike) -> Any:
        """Smallest s with P(SWDIFF ≤ s) ≥ ``level`` (exact to machine precision)."""
        lev, scalar = _levels(level)
        out = _smallest_with_tail_at_most(
            lambda v: np.asarray(self.swdiff_sf(v)), 1.0 - lev, self._swdiff_max
        )
        return float(out[0]) if scalar else out

    def expected_swdiff(self) -> float:
        """E[SWDIFF], exactly: Σ over segments of slope·E[r; seg] + intercept·P(seg)."""
        total = 0.0
        for side in ("left", "right"):
            knots, slopes, icpts = self.profile.swdiff_knots(side)
            m0, m1 = self._side_moments(side, knots)
            total += float(np.sum(slopes * m1 + icpts * m0))
        return max(total, 0.0)

    def summary(self, level: float = 0.95) -> MetricSummary:
        """E[FAIR], E[SWDIFF] and their ``level``-quantiles in one object."""
        return MetricSummary(
            expected_fair=self.expected_fair(),
            expected_swdiff=self.expected_swdiff(),
            level=float(level),
            fair_quantile=float(self.fair_quantile(level)),
            swdiff_quantile=float(self.swdiff_quantile(level)),
        )


# --------------------------------------------------------------------------- DPExpMed
@dataclass(frozen=True, eq=False)
class FacilityDistribution(OutputDistribution):
    """Exact output law of :class:`~dpfair.facility.DPExpMed` on one data set.

    The density is piecewise constant (≤ n + 2 pieces, :attr:`law`); the location's pdf,
    cdf, quantiles and sampler come from it, and so do the exact laws of FAIR, SWDIFF
    and of the mechanism's own loss p_α (:meth:`loss_pmf`).

    Attributes
    ----------
    law : PiecewiseConstantLaw
        The location's law (edges, log-levels, normalisation in log-space).
    profile : Profile
        The sorted data seen from the optimum (for the metrics).
    domain : (lo, hi)
    epsilon : float
    widening : float
        The α actually used (1/(nε) when the mechanism's ``widening`` is None).
    median : {"lower", "upper"}
    """

    law: PiecewiseConstantLaw
    profile: Profile
    domain: tuple[float, float]
    epsilon: float
    widening: float
    median: str = "lower"
    #: P(p_α(D, L) = v), v = 0..cap, at the released location L, when :attr:`law` is the
    #: public-cell law of the release (``DPExpMed``: computed with that law by
    #: ``_cell_average``) and not indexed by ranks.
    loss_probabilities: NDArray[np.float64] | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ location law
    @cached_property
    def _density(self) -> NDArray[np.float64]:
        """Normalised density level of each piece; 0 on zero-length pieces.

        A zero-length piece carries no mass but may have a level far above the others
        (e.g. the loss-0 band of width 0 when α = 0), which would overflow to inf and turn
        inf·0 into NaN in the moments.
        """
        lengths = np.diff(self.law.edges)
        with np.errstate(over="ignore"):
            dens = np.exp(self.law.log_levels - self.law.log_norm)
        dens[lengths <= 0] = 0.0
        return dens

    @cached_property
    def _tail_after(self) -> NDArray[np.float64]:
        """P(L ≥ edges[j]) for every edge, summed from the right.

        Summing positive terms from the smallest (far right) keeps every partial sum
        accurate relative to itself; only probabilities below ~1e-308 underflow to 0.
        """
        prob = self.law.piece_probabilities
        return np.concatenate((np.cumsum(prob[::-1])[::-1], [0.0]))

    @property
    def edges(self) -> NDArray[np.float64]:
        """Breakpoints of the density (clipped to the domain)."""
        return self.law.edges

    def pdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Density of the location."""
        return self.law.pdf(t)

    def logpdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Log-density of the location (``-inf`` outside the domain)."""
        return self.law.logpdf(t)

    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L ≤ t)."""
        return self.law.cdf(t)

    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L > t), accumulated from the right so that tiny tails keep their precision."""
        arr = np.asarray(t, dtype=np.float64)
        e = self.law.edges
        idx = np.clip(np.searchsorted(e, arr, side="right") - 1, 0, self.law.n_pieces - 1)
        out = self._tail_after[idx + 1] + np.clip(e[idx + 1] - arr, 0.0, None) * self._density[idx]
        out = np.where(arr < e[0], 1.0, np.where(arr >= e[-1], 0.0, out))
        return np.clip(out, 0.0, 1.0)

    def ppf(self, q: ArrayLike) -> NDArray[np.float64]:
        """Quantile function of the location."""
        return self.law.ppf(q)

    def mean(self) -> float:
        """E[L]."""
        return self.law.mean()

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: RandomLike = None
    ) -> NDArray[np.float64] | float:
        """Exact draws from the full law (O(n) set-up; the mechanism's own
        :meth:`~dpfair.facility.DPExpMed.sample` avoids the full sort)."""
        return self.law.sample(size=size, rng=rng)

    def _below(self, t: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        return self.law.cdf(t)  # no atoms: P(L < t) = P(L ≤ t)

    def _above(self, t: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        return self.sf(t)

    def _side_moments(
        self, side: str, knots: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        e = self.law.edges
        dens = self._density
        t = self.optimum
        # edges e[:j] are ≤ T and piece j − 1 contains T (T = hi: the last piece)
        j = min(int(np.searchsorted(e, t, side="right")), self.law.n_pieces)
        if side == "left":
            breaks = np.concatenate(([0.0], t - e[j - 1 :: -1]))
            seg_dens = dens[j - 1 :: -1]
        else:
            breaks = np.concatenate(([0.0], e[j:] - t))
            seg_dens = dens[j - 1 :]
        np.maximum(breaks, 0.0, out=breaks)
        if knots.size == 1:  # one segment [0, ∞): no merge needed
            lengths = np.diff(breaks)
            mass = seg_dens * lengths
            first = mass * 0.5 * (breaks[:-1] + breaks[1:])
            return np.array([mass.sum()]), np.array([first.sum()])
        merged, ca, cb = _merge_sorted(breaks, knots)
        lengths = np.diff(merged)
        seg_a = np.clip(ca[:-1] - 1, 0, seg_dens.size)
        d = np.concatenate((seg_dens, [0.0]))[seg_a]
        seg_b = np.clip(cb[:-1] - 1, 0, knots.size - 1)
        mass = d * lengths
        first = mass * 0.5 * (merged[:-1] + merged[1:])
        m0 = np.bincount(seg_b, weights=mass, minlength=knots.size).astype(np.float64)
        m1 = np.bincount(seg_b, weights=first, minlength=knots.size).astype(np.float64)
        return m0, m1

    # ------------------------------------------------------------------ mechanism loss
    @cached_property
    def _piece_loss(self) -> NDArray[np.int64]:
        k = self.profile.k
        cap = loss_cap(self.profile.n, k)
        pieces = np.arange(self.law.n_pieces)
        return np.minimum(np.abs(pieces - k), cap).astype(np.int64)

    def loss_pmf(self) -> NDArray[np.float64]:
        """P(p_α(D, L) = v) for v = 0, 1, …, cap: the law of the mechanism's own loss at the
        released location L (the cell-averaged law :attr:`law`, as :meth:`DPExpMed.sample`
        releases it; computed by ``DPExpMed.distribution``)."""
        if self.loss_probabilities is not None:
            return np.array(self.loss_probabilities, dtype=np.float64)
        cap = loss_cap(self.profile.n, self.profile.k)
        return np.bincount(
            self._piece_loss, weights=self.law.piece_probabilities, minlength=cap + 1
        ).astype(np.float64)

    def loss_sf(self, v: ArrayLike) -> Any:
        """P(p_α(D, L) > v), summed from the top so small tails keep their precision."""
        pmf = self.loss_pmf()
        tail = np.concatenate((np.cumsum(pmf[::-1])[::-1][1:], [0.0]))  # P(p > v)
        vv = np.asarray(v)
        idx = np.clip(np.floor(vv).astype(np.int64), -1, pmf.size - 1)
        out = np.where(idx < 0, 1.0, tail[np.maximum(idx, 0)])
        return float(out) if out.ndim == 0 else out

    def loss_quantile(self, level: float) -> int:
        """Smallest integer v with P(p_α ≤ v) ≥ ``level``."""
        lev, _ = _levels(level)
        for v in range(loss_cap(self.profile.n, self.profile.k) + 1):
            if float(self.loss_sf(v)) <= 1.0 - float(lev[0]):
                return v
        return loss_cap(self.profile.n, self.profile.k)

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        """Summary (no data): parameters and exact metric summaries."""
        return {
            "n": self.n,
            "domain": list(self.domain),
            "epsilon": self.epsilon,
            "widening": self.widening,
            "median": self.median,
            "pieces": self.law.n_pieces,
            **self.summary(level).to_dict(),
        }


# --------------------------------------------------------------------------- baselines
class _DelegatedLaw:
    """cdf, sf, sampling, mean and the one-sided probabilities of a baseline's output,
    read from its exact 1-D law object ``self.law`` (Laplace or discrete)."""

    law: Any

    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L ≤ t)."""
        return self.law.cdf(t)

    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L > t)."""
        return self.law.sf(t)

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: RandomLike = None
    ) -> NDArray[np.float64] | float:
        """Exact draws."""
        return self.law.sample(size=size, rng=rng)

    def mean(self) -> float:
        """E[L]."""
        return self.law.mean()

    def _below(self, t: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        return self.law.prob_below(t) if strict else self.law.cdf(t)

    def _above(self, t: NDArray[np.float64], strict: bool) -> NDArray[np.float64]:
        return self.law.sf(t) if strict else self.law.prob_above(t)


@dataclass(frozen=True, eq=False)
class LaplaceDistribution(_DelegatedLaw, OutputDistribution):
    """Exact law of the Laplace baseline as executed: x_J, J = clip(K + Z, 0, N), with K the
    median rounded to the public grid and Z discrete Laplace (``LaplaceMedian``).

    Atoms at the domain's ends carry the clipped mass; moments are closed-form geometric
    sums over the grid.
    """

    law: ClippedDiscreteLaplaceLaw
    profile: Profile
    domain: tuple[float, float]
    epsilon: float



    def _side_moments(
        self, side: str, knots: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        t = self.optimum
        ends = np.concatenate((knots, [math.inf]))
        if side == "left":  # r in [r_j, r_{j+1})  <=>  L in (T − r_{j+1}, T − r_j]
            m0, m1c = self.law.interval_moments(t - ends[1:], t - ends[:-1], center=t)
            return m0, -m1c
        m0, m1c = self.law.interval_moments(t + ends[:-1], t + ends[1:], center=t)
        return m0, m1c


@dataclass(frozen=True, eq=False)
class GridDistribution(_DelegatedLaw, OutputDistribution):
    """Exact law of the grid (discrete-candidate) exponential-mechanism baseline."""

    law: DiscreteLaw
    profile: Profile
    domain: tuple[float, float]
    epsilon: float


    def pmf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L = t)."""
        return self.law.pmf(t)


    def _side_moments(
        self, side: str, knots: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        g = self.law.support
        p = self.law.probabilities
        t = self.optimum
        if side == "left":
            sel = g <= t
            r = t - g[sel]
            seg = np.searchsorted(knots, r, side="right") - 1
        else:
            sel = g > t
            r = g[sel] - t
            seg = np.searchsorted(knots, r, side="left") - 1
        seg = np.clip(seg, 0, knots.size - 1)
        m0 = np.bincount(seg, weights=p[sel], minlength=knots.size).astype(np.float64)
        m1 = np.bincount(seg, weights=p[sel] * r, minlength=knots.size).astype(np.float64)
        return m0, m1

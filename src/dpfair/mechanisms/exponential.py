"""Exponential mechanism over a piecewise-constant score on an interval, with its exact law.

The score u(r) is constant on each piece [e_j, e_{j+1}) of a partition of a public interval
[lo, hi]; the mechanism's density is then piecewise constant, so its law is known exactly:
pdf, cdf, quantile function and sampler are all computed from the piece lengths and
log-weights, in log-space so that 10^7 pieces or ε = 50 neither overflow nor underflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_positive
from dpfair.mechanisms._score import ScoreMechanism

__all__ = ["ExponentialMechanism", "PiecewiseConstantLaw"]


@dataclass(frozen=True, eq=False)
class PiecewiseConstantLaw:
    """A probability law on [edges[0], edges[-1]] with a piecewise-constant density.

    Parameters
    ----------
    edges : array of shape (K + 1,)
        Non-decreasing breakpoints. Zero-length pieces are allowed (they carry no mass).
    log_levels : array of shape (K,)
        Unnormalised log-density on each piece ``[edges[j], edges[j+1])``.

    Notes
    -----
    All normalisation is done in log-space: ``log_mass[j] = log(len_j) + log_levels[j]``
    and ``log Z = logsumexp(log_mass)``. The density is right-continuous (a point on a
    breakpoint belongs to the first non-empty piece on its right; the right end
    ``edges[-1]`` to the last non-empty piece, so the density at each end of the closed
    support is its one-sided limit).
    """

    edges: NDArray[np.float64]
    log_levels: NDArray[np.float64]
    log_mass: NDArray[np.float64] = field(init=False, repr=False)
    log_norm: float = field(init=False)
    cum_mass: NDArray[np.float64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        edges = np.asarray(self.edges, dtype=np.float64)
        levels = np.asarray(self.log_levels, dtype=np.float64)
        if edges.ndim != 1 or levels.ndim != 1 or edges.size != levels.size + 1:
            raise InvalidParameterError(
                "edges must have exactly one more entry than log_levels "
                f"(got {edges.size} edges for {levels.size} pieces)."
            )
        if levels.size == 0:
            raise InvalidParameterError("a piecewise-constant law needs at least one piece.")
        if not np.all(np.isfinite(edges)) or np.any(np.diff(edges) < 0):
            raise InvalidParameterError("edges must be finite and non-decreasing.")
        if np.any(np.isnan(levels)) or np.any(levels == np.inf):
            raise InvalidParameterError("log_levels must not contain NaN or +inf.")
        lengths = np.diff(edges)
        with np.errstate(divide="ignore"):
            log_mass = np.log(lengths) + levels
        log_mass[lengths == 0] = -np.inf
        top = float(np.max(log_mass))
        log_norm = (
            top + math.log(float(np.sum(np.exp(log_mass - top)))) if math.isfinite(top) else top
        )
        if not math.isfinite(log_norm):
            raise InvalidParameterError("the law has no mass: every piece has zero length.")
        mass = np.exp(log_mass - log_norm)
        cum = np.concatenate(([0.0], np.cumsum(mass)))
        cum /= cum[-1]
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "log_levels", levels)
        object.__setattr__(self, "log_mass", log_mass - log_norm)
        object.__setattr__(self, "log_norm", log_norm)
        object.__setattr__(self, "cum_mass", cum)

    # ------------------------------------------------------------------ basic facts
    @property
    def support(self) -> tuple[float, float]:
        """The interval carrying the law."""
        return float(self.edges[0]), float(self.edges[-1])

    @property
    def n_pieces(self) -> int:
        """Number of pieces (including zero-length ones)."""
        return int(self.log_levels.size)

    @property
    def piece_probabilities(self) -> NDArray[np.float64]:
        """Probability of each piece."""
        return np.exp(self.log_mass)

    @property
    def log_density_levels(self) -> NDArray[np.float64]:
        """Normalised log-density on each piece (``-inf`` where the density is 0)."""
        return self.log_levels - self.log_norm

    def _piece_index(self, t: NDArray[np.float64]) -> NDArray[np.intp]:
        idx = np.searchsorted(self.edges, t, side="right") - 1
        # The right end belongs to the last piece of positive length (trailing pieces of
        # zero length, e.g. agents sitting at the upper end, carry no density there).
        idx = np.where(t == self.edges[-1], self._last_nonempty, idx)
        return np.clip(idx, 0, self.n_pieces - 1)

    @cached_property
    def _last_nonempty(self) -> int:
        """Index of the last piece of positive length."""
        return int(np.flatnonzero(np.diff(self.edges) > 0)[-1])

    # ------------------------------------------------------------------ density and cdf
    def logpdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Log-density at ``t`` (``-inf`` outside the support)."""
        arr = np.asarray(t, dtype=np.float64)
        idx = self._piece_index(arr)
        out = self.log_levels[idx] - self.log_norm
        inside = (arr >= self.edges[0]) & (arr <= self.edges[-1])
        return np.where(inside, out, -np.inf)

    def pdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Density at ``t``."""
        return np.exp(self.logpdf(t))

    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X ≤ t), exact up to floating rounding."""
        arr = np.asarray(t, dtype=np.float64)
        idx = self._piece_index(arr)
        lo = self.edges[idx]
        dens = np.exp(self.log_levels[idx] - self.log_norm)
        out = self.cum_mass[idx] + np.clip(arr - lo, 0.0, None) * dens
        out = np.where(arr < self.edges[0], 0.0, out)
        out = np.where(arr >= self.edges[-1], 1.0, out)
        return np.clip(out, 0.0, 1.0)

    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X > t), computed from the right so small tails keep their precision."""
        arr = np.asarray(t, dtype=np.float64)
        idx = self._piece_index(arr)
        hi = self.edges[idx + 1]
        dens = np.exp(self.log_levels[idx] - self.log_norm)
        tail_after = np.exp(self._log_suffix_mass()[idx + 1])
        out = tail_after + np.clip(hi - arr, 0.0, None) * dens
        out = np.where(arr < self.edges[0], 1.0, out)
        out = np.where(arr >= self.edges[-1], 0.0, out)
        return np.clip(out, 0.0, 1.0)

    def _log_suffix_mass(self) -> NDArray[np.float64]:
        """log P(X ≥ edges[j]) for j = 0..K (last entry -inf)."""
        rev = np.logaddexp.accumulate(self.log_mass[::-1])[::-1]
        return np.concatenate((rev, [-np.inf]))

    def ppf(self, q: ArrayLike) -> NDArray[np.float64]:
        """Quantile function: the smallest t with cdf(t) ≥ q."""
        qq = np.asarray(q, dtype=np.float64)
        if np.any((qq < 0) | (qq > 1) | np.isnan(qq)):
            raise InvalidParameterError("q must lie in [0, 1].")
        idx = np.searchsorted(self.cum_mass, qq, side="left") - 1
        idx = np.clip(idx, 0, self.n_pieces - 1)
        # Skip pieces without mass (a quantile never lands inside them).
        prob = self.piece_probabilities
        nonempty = np.flatnonzero(prob > 0)
        pos = np.searchsorted(nonempty, idx, side="left")
        pos = np.clip(pos, 0, nonempty.size - 1)
        idx = nonempty[pos]
        dens = np.exp(self.log_levels[idx] - self.log_norm)
        t = self.edges[idx] + (qq - self.cum_mass[idx]) / dens
        return np.clip(t, self.edges[idx], self.edges[idx + 1])

    def prob_between(self, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
        """P(a < X ≤ b) (0 where b ≤ a)."""
        aa = np.asarray(a, dtype=np.float64)
        bb = np.asarray(b, dtype=np.float64)
        return np.where(bb > aa, np.clip(self.cdf(bb) - self.cdf(aa), 0.0, 1.0), 0.0)

    def mean(self) -> float:
        """E[X], exactly: Σ_j P(piece j)·midpoint_j."""
        mids = 0.5 * (self.edges[:-1] + self.edges[1:])
        return float(np.dot(self.piece_probabilities, mids))

    # ------------------------------------------------------------------ sampling
    def sample(self, size: int | tuple[int, ...] | None = None,
               rng: RandomLike = None) -> NDArray[np.float64] | float:
        """Exact draws: a piece with probability ∝ its mass, then a uniform point inside.

        The piece is chosen by inverting the cumulative masses with one uniform draw
        (O(log K) per draw after the O(K) set-up); pieces of zero length are never chosen.
        """
        gen = as_generator(rng)
        shape = () if size is None else size
        u = gen.random(shape)
        idx = np.searchsorted(self.cum_mass, u, side="right") - 1
        idx = np.clip(idx, 0, self.n_pieces - 1)
        prob = self.piece_probabilities
        # Guard against landing on a zero-mass piece through rounding at equal cum values.
        bad = prob[idx] <= 0
        if np.any(bad):
            nonempty = np.flatnonzero(prob > 0)
            pos = np.clip(np.searchsorted(nonempty, idx[bad]), 0, nonempty.size - 1)
            idx = np.array(idx, copy=True)
            idx[bad] = nonempty[pos]
        lo, hi = self.edges[idx], self.edges[idx + 1]
        out = lo + gen.random(shape) * (hi - lo)
        out = np.minimum(out, hi)
        if size is None:
            return float(out)
        return out


@dataclass(frozen=True, slots=True)
class ExponentialMechanism(ScoreMechanism):
    """Exponential mechanism with density ∝ exp(ε·u(r) / (2Δu)) over an interval.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : float, default=1
        Δu = max over neighbouring data sets and outputs r of |u(D, r) − u(D', r)|.

    Notes
    -----
    Privacy: for neighbours D, D' and every r, the unnormalised densities differ by a
    factor at most e^{ε/2} and the normalisers by at most e^{ε/2}, so the density ratio
    is ≤ e^ε: pure ε-DP (McSherry & Talwar 2007). The mechanism is also ε-bounded-range,
    hence ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2/Cor. 3.4), see :attr:`privacy_zcdp`.
    The ratio can be checked exactly with :meth:`PiecewiseConstantLaw.logpdf`.
    """

    @classmethod
    def for_zcdp(cls, rho: float, sensitivity: float = 1.0) -> ExponentialMechanism:
        """The mechanism whose bounded-range guarantee ε²/8 equals ρ: ε = sqrt(8ρ)."""
        r = check_positive("rho", rho)
        return cls(epsilon=math.sqrt(8.0 * r), sensitivity=sensitivity)

    def law(self, edges: ArrayLike, scores: ArrayLike) -> PiecewiseConstantLaw:
        """Exact output law for a score constant on each piece ``[edges[j], edges[j+1])``."""
        s = np.asarray(scores, dtype=np.float64)
        return PiecewiseConstantLaw(
            np.asarray(edges, dtype=np.float64), self.epsilon * s / (2.0 * self.sensitivity)
        )

    def sample(self, edges: ArrayLike, scores: ArrayLike, rng: RandomLike = None) -> float:
        """One draw from :meth:`law`."""
        out = self.law(edges, scores).sample(rng=rng)
        assert isinstance(out, float)
        return out

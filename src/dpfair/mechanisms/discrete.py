"""Exponential mechanism over a finite set of real candidates, with its exact law.

This is what most DP libraries offer for private quantiles: a public grid of candidate
outputs, a sensitivity-bounded score per candidate, and a draw with probability
∝ exp(ε·score / (2Δ)). The law is a finite set of atoms, kept in log-space so that large ε
or many candidates neither overflow nor underflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair.mechanisms._score import ScoreMechanism

__all__ = ["DiscreteExponentialMechanism", "DiscreteLaw"]


@dataclass(frozen=True, eq=False)
class DiscreteLaw:
    """A probability law on finitely many real atoms.

    Parameters
    ----------
    support : array of shape (K,)
        Strictly increasing atom locations.
    log_weights : array of shape (K,)
        Unnormalised log-probabilities (``-inf`` allowed, NaN and ``+inf`` not).

    Notes
    -----
    ``cdf`` accumulates from the left and ``sf`` from the right (in log-space), so small
    tail probabilities on either side keep their relative precision.
    """

    support: NDArray[np.float64]
    log_weights: NDArray[np.float64]
    log_prob: NDArray[np.float64] = field(init=False, repr=False)
    cum: NDArray[np.float64] = field(init=False, repr=False)
    tail: NDArray[np.float64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        s = np.asarray(self.support, dtype=np.float64)
        w = np.asarray(self.log_weights, dtype=np.float64)
        if s.ndim != 1 or w.shape != s.shape or s.size == 0:
            raise InvalidParameterError(
                "support and log_weights must be non-empty 1-D arrays of the same length "
                f"(got shapes {s.shape} and {w.shape})."
            )
        if not np.all(np.isfinite(s)) or np.any(np.diff(s) <= 0):
            raise InvalidParameterError("support must be finite and strictly increasing.")
        if np.any(np.isnan(w)) or np.any(w == np.inf):
            raise InvalidParameterError("log_weights must not contain NaN or +inf.")
        log_norm = float(special.logsumexp(w))
        if not math.isfinite(log_norm):
            raise InvalidParameterError("the law has no mass: every log-weight is -inf.")
        log_prob = w - log_norm
        prob = np.exp(log_prob)
        cum = np.cumsum(prob)
        cum /= cum[-1]
        # tail[j] = P(X > support[j]), summed from the right.
        rev = np.logaddexp.accumulate(log_prob[::-1])[::-1]
        tail = np.exp(np.concatenate((rev[1:], [-np.inf])))
        object.__setattr__(self, "support", s)
        object.__setattr__(self, "log_weights", w)
        object.__setattr__(self, "log_prob", log_prob)
        object.__setattr__(self, "cum", cum)
        object.__setattr__(self, "tail", tail)

    @property
    def probabilities(self) -> NDArray[np.float64]:
        """Probability of each atom."""
        return np.exp(self.log_prob)

    def logpmf(self, t: ArrayLike) -> NDArray[np.float64]:
        """log P(X = t) (``-inf`` off the support)."""
        arr = np.asarray(t, dtype=np.float64)
        idx = np.clip(np.searchsorted(self.support, arr), 0, self.support.size - 1)
        return np.where(self.support[idx] == arr, self.log_prob[idx], -np.inf)

    def pmf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X = t)."""
        return np.exp(self.logpmf(t))

    def _sum_before(
        self, t: ArrayLike, side: Literal["left", "right"], sums: NDArray[np.float64], none: float
    ) -> NDArray[np.float64]:
        """``sums[i − 1]`` at i = searchsorted(support, t, side), or ``none`` where i = 0."""
        idx = np.searchsorted(self.support, np.asarray(t, dtype=np.float64), side=side)
        return np.where(idx > 0, sums[np.maximum(idx - 1, 0)], none)

    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X ≤ t)."""
        return self._sum_before(t, "right", self.cum, 0.0)

    def prob_below(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X < t)."""
        return self._sum_before(t, "left", self.cum, 0.0)

    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X > t), summed from the right."""
        # atoms idx.. are > t; P = tail[idx - 1] when idx > 0, else 1
        return self._sum_before(t, "right", self.tail, 1.0)

    def prob_above(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X ≥ t)."""
        return self._sum_before(t, "left", self.tail, 1.0)

    def ppf(self, q: ArrayLike) -> NDArray[np.float64]:
        """Smallest atom x with P(X ≤ x) ≥ q."""
        qq = np.asarray(q, dtype=np.float64)
        if np.any((qq < 0) | (qq > 1) | np.isnan(qq)):
            raise InvalidParameterError("q must lie in [0, 1].")
        idx = np.clip(np.searchsorted(self.cum, qq, side="left"), 0, self.support.size - 1)
        return self.support[idx]

    def mean(self) -> float:
        """E[X]."""
        return float(np.dot(self.probabilities, self.support))

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: RandomLike = None
    ) -> NDArray[np.float64] | float:
        """Exact draws by inverting the cumulative probabilities with one uniform each."""
        gen = as_generator(rng)
        shape = () if size is None else size
        u = gen.random(shape)
        idx = np.searchsorted(self.cum, u, side="right")
        idx = np.clip(idx, 0, self.support.size - 1)
        prob = self.probabilities
        bad = prob[idx] <= 0
        if np.any(bad):  # a rounding tie landed on a zero-probability atom
            nonzero = np.flatnonzero(prob > 0)
            pos = np.clip(np.searchsorted(nonzero, idx[bad]), 0, nonzero.size - 1)
            idx = np.array(idx, copy=True)
            idx[bad] = nonzero[pos]
        out = self.support[idx]
        if size is None:
            return float(out)
        return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class DiscreteExponentialMechanism(ScoreMechanism):
    """Exponential mechanism on finitely many candidates: P(c) ∝ exp(ε·u(c) / (2Δu)).

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : float, default=1
        Δu = max over neighbouring data sets and candidates c of |u(D, c) − u(D', c)|.

    Notes
    -----
    Privacy: for neighbours D, D' every unnormalised weight changes by a factor at most
    e^{ε/2}, and so does their sum, so every probability ratio is at most e^ε: pure ε-DP
    (McSherry & Talwar 2007). The candidate set must be public (fixed before seeing the
    data). Like the continuous mechanism it is ε-bounded-range, hence ε²/8-zCDP
    (Cesar & Rogers 2021), see :attr:`privacy_zcdp`.
    """

    def law(self, candidates: ArrayLike, scores: ArrayLike) -> DiscreteLaw:
        """Exact output law for the given (public) candidates and their scores."""
        c = np.asarray(candidates, dtype=np.float64)
        s = np.asarray(scores, dtype=np.float64)
        if c.ndim != 1 or s.shape != c.shape:
            raise InvalidParameterError(
                f"candidates and scores must be 1-D of the same length (got {c.shape} and "
                f"{s.shape})."
            )
        order = np.argsort(c, kind="stable")
        return DiscreteLaw(c[order], self.epsilon * s[order] / (2.0 * self.sensitivity))

    def sample(self, candidates: ArrayLike, scores: ArrayLike, rng: RandomLike = None) -> float:
        """One draw from :meth:`law`."""
        out = self.law(candidates, scores).sample(rng=rng)
        assert isinstance(out, float)
        return out

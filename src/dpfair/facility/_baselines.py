r"""Baselines to set beside DPExpMed_α (paper 000 discusses none of them empirically).

* :func:`unwidened_expmed` — DPExpMed with α = 0: the plain continuous exponential mechanism
  on the percentile loss q (ε-DP by Lemma 7.6 with α = 0).
* :class:`LaplaceMedian` — the median plus Laplace noise, clipped to the domain.
  Sensitivity, derived: for replace-one neighbours D, D' with all locations in V,
  T(D) and T(D') both lie in V, so |T(D) − T(D')| ≤ m; the impossibility pair of Thm 5.1
  (⌈n/2⌉ agents at lo and the rest at hi, one of them moved to hi) moves the median from lo
  to hi, so the global sensitivity is exactly m. Laplace(m/ε) noise is then ε-DP and
  clipping to V is post-processing. (The *local* sensitivity is usually tiny; calibrating
  to it would not be DP.)
* :class:`GridExpMed` — what DP libraries offer for a private median: the exponential
  mechanism over a public grid of candidates c with the rank-balance score
  u(c) = −|#{x_i < c} − #{x_i > c}| / 2. Replacing one agent changes each count by at most
  1 and their difference by at most 2, so u has sensitivity 1 and P(c) ∝ exp(ε·u(c)/2) is
  ε-DP. ``score="percentile"`` uses −q(D, c) instead (sensitivity 1, Lemma 7.6 with α = 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_interval_bounds, check_positive
from dpfair.facility._laws import GridDistribution, LaplaceDistribution
from dpfair.facility._mechanism import DPExpMed, check_locations
from dpfair.facility._metrics import MedianChoice, Profile, check_median, median_index
from dpfair.mechanisms.discrete import DiscreteExponentialMechanism
from dpfair.mechanisms.laplace import LaplaceMechanism
from dpfair.privacy import Accountant, Budget

__all__ = ["GridExpMed", "LaplaceMedian", "unwidened_expmed"]

GridScore = Literal["rank", "percentile"]


def unwidened_expmed(
    epsilon: float, domain: tuple[float, float], *, median: MedianChoice = "lower"
) -> DPExpMed:
    """The unwidened exponential mechanism DPExpMed_0 (α = 0), ε-DP."""
    return DPExpMed(epsilon, domain, widening=0.0, median=median)


def _draws(out: NDArray[np.float64] | float, size: int | None) -> Any:
    if size is None:
        return float(np.asarray(out))
    return np.asarray(out, dtype=np.float64)


def _check_size(size: Any) -> int:
    if size is None:
        return 1
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise InvalidParameterError(
            f"size={size!r}: expected None (one location) or a non-negative integer."
        )
    return int(size)


@dataclass(frozen=True)
class LaplaceMedian:
    """Median plus Laplace(m/ε) noise, clipped to the domain: an ε-DP baseline.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    domain : (lo, hi)
        Public domain; locations outside it raise.
    median : {"lower", "upper"}, default="lower"

    Notes
    -----
    Privacy: pure ε-DP under replace-one neighbours. The median of data in V has global
    sensitivity exactly m = hi − lo (derivation in :mod:`dpfair.facility._baselines`), so
    the noise scale is m/ε; clipping is post-processing.
    """

    epsilon: float
    domain: tuple[float, float]
    median: MedianChoice = "lower"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(
            self, "domain", check_interval_bounds("domain", self.domain, example="(0.0, 1.0)")
        )
        object.__setattr__(self, "median", check_median(self.median))

    @property
    def mechanism(self) -> LaplaceMechanism:
        """The underlying Laplace mechanism (sensitivity m)."""
        lo, hi = self.domain
        return LaplaceMechanism(self.epsilon, hi - lo)

    @property
    def privacy(self) -> Budget:
        """Pure ε-DP per release."""
        return self.mechanism.privacy

    def distribution(self, x: ArrayLike) -> LaplaceDistribution:
        """Exact output law (atoms at the domain's ends) with FAIR/SWDIFF laws."""
        xs = check_locations(x, self.domain)
        xs.sort()
        prof = Profile.from_sorted(xs, self.median)
        return LaplaceDistribution(
            law=self.mechanism.law(prof.optimum, clip=self.domain),
            profile=prof,
            domain=self.domain,
            epsilon=self.epsilon,
        )

    def sample(
        self,
        x: ArrayLike,
        rng: RandomLike = None,
        size: int | None = None,
        *,
        accountant: Accountant | None = None,
    ) -> Any:
        """Release one location (or ``size`` independent ones, ``size·ε`` in total)."""
        count = _check_size(size)
        gen = as_generator(rng)
        xs = check_locations(x, self.domain)
        if accountant is not None:
            accountant.charge(Budget.pure(self.epsilon * count), label="facility/laplace")
        k = median_index(xs.size, self.median)
        xs.partition(k - 1)
        law = self.mechanism.law(float(xs[k - 1]), clip=self.domain)
        return _draws(law.sample(size=size, rng=gen), size)


@dataclass(frozen=True)
class GridExpMed:
    """Exponential mechanism over a public grid of candidate locations (library-style).

    Parameters
    ----------
    epsilon : float
        ε > 0.
    domain : (lo, hi)
        Public domain.
    grid_size : int, default=1001
        Number of equally spaced candidates in [lo, hi] (both ends included), >= 2.
    score : {"rank", "percentile"}, default="rank"
        ``"rank"``: u(c) = −|#{x < c} − #{x > c}|/2 (the usual DP-median score);
        ``"percentile"``: u(c) = −q(D, c), the paper's percentile loss.
    median : {"lower", "upper"}, default="lower"
        Used by ``score="percentile"`` and by the metrics.

    Notes
    -----
    Privacy: pure ε-DP under replace-one neighbours; both scores have sensitivity 1
    (derivation in :mod:`dpfair.facility._baselines`) and the candidates are public.
    """

    epsilon: float
    domain: tuple[float, float]
    grid_size: int = 1001
    score: GridScore = "rank"
    median: MedianChoice = "lower"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(
            self, "domain", check_interval_bounds("domain", self.domain, example="(0.0, 1.0)")
        )
        g = self.grid_size
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 2:
            raise InvalidParameterError(f"grid_size={g!r}: expected an integer >= 2.")
        if self.score not in ("rank", "percentile"):
            raise InvalidParameterError(
                f"score={self.score!r}: expected 'rank' or 'percentile'."
            )
        object.__setattr__(self, "median", check_median(self.median))

    @property
    def candidates(self) -> NDArray[np.float64]:
        """The public grid."""
        lo, hi = self.domain
        return np.linspace(lo, hi, int(self.grid_size))

    @property
    def privacy(self) -> Budget:
        """Pure ε-DP per release."""
        return Budget.pure(self.epsilon)

    def _scores(self, prof: Profile) -> NDArray[np.float64]:
        c = self.candidates
        if self.score == "rank":
            below = np.searchsorted(prof.xs, c, side="left")
            above = prof.n - np.searchsorted(prof.xs, c, side="right")
            return -0.5 * np.abs(below - above).astype(np.float64)
        return -prof.percentile_loss(c).astype(np.float64)

    def distribution(self, x: ArrayLike) -> GridDistribution:
        """Exact output law (atoms on the grid) with FAIR/SWDIFF laws."""
        xs = check_locations(x, self.domain)
        xs.sort()
        prof = Profile.from_sorted(xs, self.median)
        law = DiscreteExponentialMechanism(self.epsilon).law(self.candidates, self._scores(prof))
        return GridDistribution(law=law, profile=prof, domain=self.domain, epsilon=self.epsilon)

    def sample(
        self,
        x: ArrayLike,
        rng: RandomLike = None,
        size: int | None = None,
        *,
        accountant: Accountant | None = None,
    ) -> Any:
        """Release one grid point (or ``size`` independent ones, ``size·ε`` in total)."""
        count = _check_size(size)
        gen = as_generator(rng)
        dist = self.distribution(x)
        if accountant is not None:
            accountant.charge(Budget.pure(self.epsilon * count), label="facility/grid")
        return _draws(dist.law.sample(size=size, rng=gen), size)

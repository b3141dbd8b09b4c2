r"""Baselines to set beside DPExpMed_α (paper 000 discusses none of them empirically).

* :func:`unwidened_expmed` — DPExpMed with α = 0: the plain continuous exponential mechanism
  on the percentile loss q (ε-DP by Lemma 7.6 with α = 0).
* :class:`LaplaceMedian` — the median plus Laplace noise, clipped to the domain, executed
  as a *discrete* Laplace mechanism on a public grid (no floating-point leak, below).
  Sensitivity, derived: for replace-one neighbours D, D' with all locations in V,
  T(D) and T(D') both lie in V, so |T(D) − T(D')| ≤ m; the impossibility pair of Thm 5.1
  (⌈n/2⌉ agents at lo and the rest at hi, one of them moved to hi) moves the median from lo
  to hi, so the global sensitivity is exactly m. Laplace(m/ε) noise is then ε-DP and
  clipping to V is post-processing. (The *local* sensitivity is usually tiny; calibrating
  to it would not be DP.)

  As executed (``docs/floating_point.md``): the grid is x_j = lo + j·h, j = 0..N, x_N = hi,
  h = m/N with N = 2^b (b = 32 by default, lowered only so that h ≥ 8 ulps of the domain's
  scale and ⌈N/ε⌉ ≤ 2^52). The median enters only through the integer
  K = clip(rint((T − lo)/h), 0, N) — whatever the rounding, K ∈ {0..N}, so
  |K(D) − K(D')| ≤ N (the same "sensitivity m" in grid units, attained by the
  impossibility pair). The release is x_J, J = clip(K + Z, 0, N), with Z the discrete
  Laplace of integer scale t = ⌈N/ε⌉ drawn by the exact Canonne–Kamath–Steinke sampler
  (:mod:`dpfair.mechanisms.discrete_laplace`): pmf ratio ≤ exp(N/t) ≤ e^ε, exactly, for
  any K, K' in range; clipping and the map j ↦ x_j are post-processing. The binary64
  continuous version (T + Laplace(m/ε) in floating point) leaked T's low-order bits
  (Mironov 2012): ``tests/privacy/test_float_attacks.py``.
* :class:`GridExpMed` — what DP libraries offer for a private median: the exponential
  mechanism over a public grid of candidates c with the rank-balance score
  u(c) = −|#{x_i < c} − #{x_i > c}| / 2. Replacing one agent changes each count by at most
  1 and their difference by at most 2, so u has sensitivity 1 and P(c) ∝ exp(ε·u(c)/2) is
  ε-DP. ``score="percentile"`` uses −q(D, c) instead (sensitivity 1, Lemma 7.6 with α = 0).

  As executed (``docs/floating_point.md``): the output is a public grid point and the data
  enter the selection only through the integer score profile. Counts #{x_i < c} and
  #{x_i ≤ c} against public binary64 candidates are exact comparisons (so are the counts
  behind q), hence data sets with equal counts give bit-identical outputs under a common
  seed: low-order bits of a record are invisible unless they change an exact count, which
  the real-arithmetic proof covers. The candidate is chosen by the exact sampler
  :func:`~dpfair.mechanisms.exact_choice.choose_pieces` with masses 1 and integer offsets
  d_c (``rank``: d = |#{x < c} − #{x > c}| − min, one unit = half a score point, so a
  neighbour moves d by ≤ 2 units and the rate is c = ε/4 per unit; ``percentile``:
  d = q − min q, rate ε/2), the rate an exact rational ≤ the stated one
  (:func:`~dpfair.mechanisms.exact_choice.exact_rate`). The executed law is exactly
  P(c) ∝ exp(−rate·d_c): pure ε-DP as executed, no floating-point slack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._validation import check_interval_bounds, check_positive
from dpfair.facility._laws import GridDistribution, LaplaceDistribution
from dpfair.facility._mechanism import DPExpMed, _FacilityRelease, sorted_profile
from dpfair.facility._metrics import MedianChoice, Profile, check_median, median_index
from dpfair.mechanisms import (
    LAPLACE_MAX_SCALE as MAX_SCALE,
)
from dpfair.mechanisms import (
    ClippedDiscreteLaplaceLaw,
    DiscreteExponentialMechanism,
    PieceMasses,
    choose_pieces,
    discrete_laplace_scale,
    exact_rate,
)
from dpfair.privacy import Budget

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


#: Default grid of the Laplace baseline: N = 2^32 steps across the domain.
LAPLACE_GRID_BITS = 32


def laplace_grid_steps(domain: tuple[float, float], epsilon: float, bits: int) -> int:
    """N = 2^b for the Laplace baseline's public grid (module docstring).

    b = ``bits``, lowered so that the spacing h = m/N is at least 8 ulps of the domain's
    scale s = max(|lo|, |hi|, m) (grid points stay distinct and increasing in binary64)
    and so that the integer noise scale ⌈N/ε⌉ stays ≤ 2^52. Public inputs only.
    """
    lo, hi = domain
    m = hi - lo
    s = max(abs(lo), abs(hi), m)
    b = min(int(bits), math.floor(math.log2(m)) - math.floor(math.log2(s)) + 49)
    b = min(b, math.floor(math.log2(epsilon)) + 52)
    if b < 0:
        raise InvalidParameterError(
            f"epsilon={epsilon!r}, domain={domain!r}: the Laplace baseline's grid would have "
            "no interior point (epsilon below 2^-52, or a domain narrower than 8 ulps)."
        )
    return 2**b


@dataclass(frozen=True)
class LaplaceMedian(_FacilityRelease):
    """Median plus Laplace(m/ε) noise, clipped to the domain: an ε-DP baseline, executed
    as a discrete Laplace mechanism on a public grid.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    domain : (lo, hi)
        Public domain; locations outside it raise.
    median : {"lower", "upper"}, default="lower"
    grid_bits : int, default=32
        The release lies on the public grid lo + j·m/2^b, j = 0..2^b (b = ``grid_bits``,
        lowered automatically for tiny domains or ε, :func:`laplace_grid_steps`).

    Notes
    -----
    Privacy: pure ε-DP under replace-one neighbours. The median of data in V has global
    sensitivity exactly m = hi − lo (derivation in :mod:`dpfair.facility._baselines`); in
    grid units the rounded median K ∈ {0..N} has sensitivity N, and the discrete Laplace
    noise of integer scale t = ⌈N/ε⌉ makes every pmf ratio ≤ e^{N/t} ≤ e^ε, exactly as
    executed (exact integer sampler, no floating point before the public map j ↦ x_j).
    Clipping is post-processing. Accuracy: the law is the continuous clip(T + Laplace(m/ε))
    discretised at h = m/N (2^-32·m by default) with T rounded to the grid.
    """

    epsilon: float
    domain: tuple[float, float]
    median: MedianChoice = "lower"
    grid_bits: int = LAPLACE_GRID_BITS

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        object.__setattr__(
            self, "domain", check_interval_bounds("domain", self.domain, example="(0.0, 1.0)")
        )
        object.__setattr__(self, "median", check_median(self.median))
        b = self.grid_bits
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b <= 52:
            raise InvalidParameterError(f"grid_bits={b!r}: expected an integer in [0, 52].")
        laplace_grid_steps(self.domain, self.epsilon, int(b))  # raises early if impossible

    @property
    def steps(self) -> int:
        """N: the grid has N + 1 points, spacing m/N."""
        return laplace_grid_steps(self.domain, self.epsilon, int(self.grid_bits))

    @property
    def noise_scale(self) -> int:
        """The integer discrete-Laplace scale t = ⌈N/ε⌉ (grid units)."""
        t = discrete_laplace_scale(self.steps, self.epsilon)
        assert t <= MAX_SCALE
        return t

    @property
    def privacy(self) -> Budget:
        """Pure ε-DP per release (exactly N/t ≤ ε as executed)."""
        return Budget.pure(self.epsilon)

    def _law(self, median_value: float) -> ClippedDiscreteLaplaceLaw:
        lo, hi = self.domain
        n = self.steps
        # Any deterministic map into {0..N} keeps the sensitivity N; rounding to nearest.
        k = int(np.clip(np.rint((median_value - lo) / ((hi - lo) / n)), 0, n))
        return ClippedDiscreteLaplaceLaw(k, self.noise_scale, n, lo, hi)

    def distribution(self, x: ArrayLike) -> LaplaceDistribution:
        """Exact output law (atoms on the grid, incl. the domain's ends) with FAIR/SWDIFF laws."""
        prof = sorted_profile(x, self.domain, self.median)
        return LaplaceDistribution(
            law=self._law(prof.optimum),
            profile=prof,
            domain=self.domain,
            epsilon=self.epsilon,
        )

    _ledger_label: ClassVar[str] = "facility/laplace"

    def _draw(
        self, xs: NDArray[np.float64], gen: np.random.Generator, count: int, size: int | None
    ) -> Any:
        """The noisy median of ``xs`` (partitioned, not sorted), ``count`` times."""
        k = median_index(xs.size, self.median)
        xs.partition(k - 1)
        law = self._law(float(xs[k - 1]))
        return _draws(law.sample(size=size, rng=gen), size)


@dataclass(frozen=True)
class GridExpMed(_FacilityRelease):
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
    Privacy: pure ε-DP under replace-one neighbours for the exact law; both scores have
    sensitivity 1 (derivation in :mod:`dpfair.facility._baselines`) and the candidates are
    public. As executed, the data enter only through integer counts against the public
    candidates and the candidate is drawn by an exact sampler (no floating-point slack),
    so the guarantee is pure ε-DP for the executed code.
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
        """Pure ε-DP per release, as executed (exact sampler, integer scores)."""
        return Budget.pure(self.epsilon)

    def _units(self, prof: Profile) -> tuple[NDArray[np.int64], int]:
        """Integer score offsets d_c ≥ 0 (min 0) and units per sensitivity (rank: 2)."""
        c = self.candidates
        if self.score == "rank":
            below = np.searchsorted(prof.xs, c, side="left")
            above = prof.n - np.searchsorted(prof.xs, c, side="right")
            d = np.abs(below - above).astype(np.int64)
            return d - d.min(), 2
        loss = prof.percentile_loss(c).astype(np.int64)
        return loss - loss.min(), 1

    def _scores(self, prof: Profile) -> NDArray[np.float64]:
        """The scores −d_c/units (maximum exactly 0), for the exact law :meth:`distribution`.

        The sampler uses the integers d_c themselves (:meth:`_units`); the law built from
        these scores is the same up to the rate's relative 2^-50 (:func:`exact_rate`).
        """
        units, per_sensitivity = self._units(prof)
        return -units.astype(np.float64) / per_sensitivity

    def distribution(self, x: ArrayLike) -> GridDistribution:
        """Exact output law (atoms on the grid) with FAIR/SWDIFF laws."""
        prof = sorted_profile(x, self.domain, self.median)
        law = DiscreteExponentialMechanism(self.epsilon).law(self.candidates, self._scores(prof))
        return GridDistribution(law=law, profile=prof, domain=self.domain, epsilon=self.epsilon)

    _ledger_label: ClassVar[str] = "facility/grid"

    def _draw(
        self, xs: NDArray[np.float64], gen: np.random.Generator, count: int, size: int | None
    ) -> Any:
        """``count`` exact choices among the candidates, from the integer scores."""
        xs.sort()
        units, per_sensitivity = self._units(Profile.from_sorted(xs, self.median))
        masses = PieceMasses.exact_floats(np.ones(units.size))
        pick = choose_pieces(masses, units, exact_rate(self.epsilon, per_sensitivity), gen,
                             count)
        return _draws(self.candidates[pick] if size is not None else self.candidates[pick[0]],
                      size)

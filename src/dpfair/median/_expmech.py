r"""ExpMech: two exponential-mechanism order statistics (paper 004, §3 and supplement B).

Mechanism for a target rank k on the public range R = [a, b] with granularity θ
-----------------------------------------------------------------------------------
Data are clipped into R (a copy; a median inside R keeps its rank) and sorted. With
c(t) = #{i : x_i ≤ t}, the score of an output r ∈ R is

.. math:: s_k(r) = -\max\{0,\; k - c(r + θ),\; c(r - θ) - k\}.

Each c(·) changes by at most 1 when one record is replaced, so s_k has sensitivity 1.
Equivalently: move the k smallest points down by θ and the others up by θ (clipping to R),
call the results y_1 ≤ … ≤ y_n and set y_0 = a, y_{n+1} = b; then s_k = −|j − k| on the
piece [y_j, y_{j+1}). The density ∝ exp(ε·s_k/2) is piecewise constant over ≤ n + 1 pieces,
so its law is exact (:class:`~dpfair.mechanisms.PiecewiseConstantLaw`) and sampling costs
O(n) after the sort.

Tail bound (data-free). The score-0 band is [x_(k) − θ, x_(k+1) + θ) ∩ R. Away from the
ends of R it is at least 2θ wide; when x_(k) and x_(k+1) both sit on an end of R it shrinks
to θ, so the true minimum width is w = θ. The set {s_k ≤ −t} has Lebesgue measure at most
|R| − w and density ratio e^{−εt/2} to the band, hence

.. math:: \mathrm{tail}(t) = P(s_k(A) ≤ -t) ≤ \min\{1, C e^{-εt/2}\},\qquad C = (|R| - θ)/θ.

Coverage (conditioning on B = rank of med(P) ~ Bin(n, 1/2)). Given B = m, med(P) lies
strictly between x_(m) and x_(m+1) (a.s. for continuous P).

* Lower end L = A_L − θ fails iff A_L − θ > med > x_(m), which forces c(A_L − θ) ≥ m and so
  s_{kL}(A_L) ≤ −(m − kL). For m ≤ kL we bound the failure probability by 1 (for m = kL
  the band itself reaches above the median); for m > kL by tail(m − kL).
* Upper end U = A_U + θ fails iff A_U + θ < med < x_(m+1), which forces c(A_U + θ) ≤ m and
  so s_{kU}(A_U) ≤ −(kU − m): bounded by 1 for m ≥ kU and by tail(kU − m) otherwise.

Hence P(L > med) ≤ F(kL) = P(B ≤ kL) + Σ_{m>kL} P(B=m)·tail(m − kL) and, by B ↔ n − B,
P(U < med) ≤ F(n − kU). We take kL the largest rank with F(kL) ≤ α/2 and kU = n − kL
(:func:`dpfair.median._ranks.expmech_lower_failure` computes F for all ranks in O(n)).
Off-by-one check: with no privacy noise and θ → 0, F(k) = P(B ≤ k), so kL is one below
the classical rank (the mechanism for rank k returns a point of [x_(k), x_(k+1))).

Privacy. Each draw is the exponential mechanism with ε = 2·sqrt(ρ) on a sensitivity-1
score: pure ε-DP and, by the bounded-range property, ε²/8 = ρ/2-zCDP (Cesar & Rogers
2021). Two draws compose to ρ-zCDP. The range and θ are public; the final interval is
clipped to R (post-processing: the median is promised to lie in R).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InsufficientDataError
from dpfair.mechanisms import ExponentialMechanism, PiecewiseConstantLaw, sample_piece_windowed
from dpfair.median._ranks import expmech_lower_target
from dpfair.privacy import Accountant, Budget

__all__ = [
    "SortedCounts",
    "expmech_interval",
    "expmech_target_ranks",
    "order_statistic_law",
    "sample_order_statistic",
]


def order_statistic_law(
    x_sorted: NDArray[np.float64],
    k: int,
    epsilon: float,
    bounds: tuple[float, float],
    granularity: float,
) -> PiecewiseConstantLaw:
    """Exact output law of the granular exponential mechanism for the rank-``k`` statistic.

    ``x_sorted`` must already be clipped into ``bounds`` and sorted (callers in this
    package guarantee it); ``k`` ranges over 0..n.
    """
    a, b = bounds
    n = x_sorted.size
    shifted = np.empty(n + 2, dtype=np.float64)
    shifted[0] = a
    shifted[n + 1] = b
    shifted[1 : k + 1] = x_sorted[:k] - granularity
    shifted[k + 1 : n + 1] = x_sorted[k:] + granularity
    np.clip(shifted, a, b, out=shifted)
    scores = -np.abs(np.arange(n + 1, dtype=np.float64) - k)
    return ExponentialMechanism(epsilon).law(shifted, scores)


#: The window of the exact windowed sampler leaves outside at most 10^-margin of the
#: score-0 band's mass (the exact O(n) branch runs with at most that probability).
_WINDOW_MARGIN_DIGITS = 12.0


class SortedCounts:
    """A sorted sample stored as (distinct values, counts): O(#values) memory.

    Used by the aggregated (histogram) path, where each record has been replaced by the
    upper edge of its bin. ``take`` returns order statistics by 0-based rank.
    """

    def __init__(self, values: NDArray[np.float64], counts: NDArray[np.int64]) -> None:
        keep = np.asarray(counts) > 0
        self.values = np.asarray(values, dtype=np.float64)[keep]
        self.counts = np.asarray(counts, dtype=np.int64)[keep]
        self.cum = np.cumsum(self.counts)
        self.size = int(self.cum[-1]) if self.cum.size else 0

    def take(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        """Order statistics x_(idx+1) (0-based ranks)."""
        return self.values[np.searchsorted(self.cum, idx, side="right")]

    def sparse_law(
        self, k: int, epsilon: float, bounds: tuple[float, float], granularity: float
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        """(piece index j, piece edges, log-mass) of every piece that can have mass.

        Between tied records the dense law's pieces have zero length, so only the piece
        after the last rank of each (shifted) group of ties, plus piece 0, can carry mass.
        A group straddling rank k is split: its first part is shifted down, the rest up.
        """
        a, b = bounds
        before = self.cum - self.counts  # ranks strictly before each group
        split = np.flatnonzero((before < k) & (self.cum > k))
        values = self.values
        last = self.cum.copy()
        down = self.cum <= k
        if split.size:
            g = int(split[0])
            values = np.insert(values, g, values[g])
            last = np.insert(last, g, k)
            down = np.insert(down, g, True)
            down[g + 1] = False
        shifted = np.clip(np.where(down, values - granularity, values + granularity), a, b)
        edges = np.concatenate(([a], shifted, [b]))
        pieces = np.concatenate(([0], last)).astype(np.intp)
        with np.errstate(divide="ignore"):
            log_mass = np.log(np.diff(edges)) - epsilon * np.abs(pieces - k) / 2.0
        return pieces, edges, log_mass


class _SortedArray:
    """A sorted in-memory sample with the same interface as :class:`SortedCounts`."""

    def __init__(self, x_sorted: NDArray[np.float64]) -> None:
        self.x = x_sorted
        self.size = int(x_sorted.size)

    def take(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.x[idx]

    def sparse_law(
        self, k: int, epsilon: float, bounds: tuple[float, float], granularity: float
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        law = order_statistic_law(self.x, k, epsilon, bounds, granularity)
        # unnormalised, on the same scale as the window's log-masses
        return np.arange(self.size + 1), law.edges, law.log_mass + law.log_norm


def sample_order_statistic(
    x_sorted: NDArray[np.float64] | SortedCounts,
    k: int,
    epsilon: float,
    bounds: tuple[float, float],
    granularity: float,
    rng: np.random.Generator,
) -> float:
    """One exact draw from :func:`order_statistic_law` in O(T) instead of O(n).

    Piece j has mass len_j·e^{−ε|j−k|/2}. The pieces with |j − k| > T have total mass at
    most |R|·e^{−ε(T+1)/2}; with T chosen so that this is < 1e-12 of the score-0 band's
    mass (≥ θ), :func:`~dpfair.mechanisms.sample_piece_windowed` draws exactly while
    touching only 2T + 1 pieces, except with probability < 1e-12 (then it computes all).
    ``x_sorted`` may also be a :class:`SortedCounts` (histogram path).
    """
    sample = x_sorted if isinstance(x_sorted, SortedCounts) else _SortedArray(x_sorted)
    a, b = bounds
    n = sample.size
    band = min(granularity, b - a)
    log_ratio = math.log((b - a) / band) + _WINDOW_MARGIN_DIGITS * math.log(10.0)
    half = max(1, math.ceil(2.0 * log_ratio / epsilon))
    j_lo, j_hi = max(0, k - half), min(n, k + half)  # window of pieces j_lo..j_hi
    # Breakpoints y_j for j = j_lo..j_hi+1 (y_0 = a, y_{n+1} = b).
    j = np.arange(j_lo, j_hi + 2)
    vals = sample.take(np.clip(j - 1, 0, n - 1))
    y = np.where(j <= k, vals - granularity, vals + granularity)
    y = np.where(j == 0, a, np.where(j == n + 1, b, y))
    np.clip(y, a, b, out=y)
    lengths = np.diff(y)
    pieces = np.arange(j_lo, j_hi + 1)
    with np.errstate(divide="ignore"):
        log_mass = np.log(lengths) - epsilon * np.abs(pieces - k) / 2.0
    outside = math.log(b - a) - epsilon * (half + 1) / 2.0
    cache: dict[str, tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]] = {}

    def full() -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        cache["law"] = sample.sparse_law(k, epsilon, bounds, granularity)
        return cache["law"][0], cache["law"][2]

    piece = sample_piece_windowed(log_mass, j_lo, outside, full, rng)
    if j_lo <= piece <= j_hi:
        lo, hi = y[piece - j_lo], y[piece - j_lo + 1]
    else:
        index, edges, _ = cache["law"]
        pos = int(np.searchsorted(index, piece))
        lo, hi = edges[pos], edges[pos + 1]
    return float(min(lo + rng.random() * (hi - lo), hi))


@functools.lru_cache(maxsize=256)
def expmech_target_ranks(
    n: int, epsilon: float, alpha: float, range_width: float, granularity: float
) -> tuple[int, int, float]:
    """Target ranks (kL, kU) and the tail constant C for ExpMech; see the module docstring.

    Raises
    ------
    InsufficientDataError
        If no rank gives lower-tail failure ≤ α/2.
    """
    band = min(granularity, range_width)
    ratio = max(range_width - band, 0.0) / band

    k_low = expmech_lower_target(n, epsilon, ratio, alpha / 2.0)
    if k_low < 0:
        raise InsufficientDataError(
            f"n={n} is too small for a valid ExpMech interval at alpha={alpha:g} with "
            f"epsilon={epsilon:.4g} per draw and range/granularity ratio {ratio:.4g}: even the "
            "lowest rank misses the median too often. Increase n, rho or alpha, or use a "
            "narrower public range."
        )
    return k_low, n - k_low, ratio


def expmech_interval(
    x_sorted: NDArray[np.float64] | SortedCounts,
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    granularity: float,
    rng: np.random.Generator,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """Run ExpMech on clipped, sorted data (an array or :class:`SortedCounts`).

    Returns (low, high, spent, diagnostics).
    """
    n = x_sorted.size
    a, b = bounds
    mech = ExponentialMechanism.for_zcdp(rho / 2.0)  # ε²/8 = ρ/2 per draw: ε = 2·sqrt(ρ)
    k_low, k_high, ratio = expmech_target_ranks(n, mech.epsilon, alpha, b - a, granularity)
    acct = Accountant(Budget.zcdp(rho))
    acct.charge(mech.privacy_zcdp, label="expmech/lower")
    draw_low = sample_order_statistic(x_sorted, k_low, mech.epsilon, bounds, granularity, rng)
    acct.charge(mech.privacy_zcdp, label="expmech/upper")
    draw_high = sample_order_statistic(x_sorted, k_high, mech.epsilon, bounds, granularity,
                                       rng)
    low = max(a, draw_low - granularity)
    high = min(b, draw_high + granularity)
    diagnostics: dict[str, Any] = {
        "target_ranks": (k_low, k_high),
        "epsilon_per_draw": mech.epsilon,
        "zcdp_conversion": "bounded range: eps^2/8 per draw",
        "tail_constant": ratio,
        "ledger": [(e.label, e.budget.rho) for e in acct.ledger],
    }
    return low, high, acct.spent, diagnostics

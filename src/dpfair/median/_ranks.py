r"""Exact target ranks from the conditional coverage analysis (paper 004, Eq. 1).

Let B = #{i : x_i ≤ med(P)}; for a continuous population B ~ Bin(n, 1/2). A lower
end-point L computed from a rank-k mechanism fails (L > med) only if its *rank error*
is large. If, conditionally on B = m, the failure probability is at most 1 for m ≤ k and
at most ``tail(m − k)`` for m > k, where ``tail`` is a data-independent bound on
P(rank error ≥ t), then

.. math::  P(L > \mathrm{med}) \le F(k) := P(B \le k) + \sum_{m > k} P(B = m)\,\mathrm{tail}(m - k).

F is non-decreasing in k, so the largest k with F(k) ≤ α/2 is the best valid target. By the
symmetry B ↔ n − B the upper target is n − k. Everything here is exact binomial arithmetic:
no normal approximation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InsufficientDataError
from dpfair._lazy import LazyModule
from dpfair.median._binomial import binom_cdf, binom_log_pmf, binom_sf

special: Any = LazyModule("scipy.special")  # imported on first use (gaussian_union_tail)

__all__ = [
    "expmech_lower_failure",
    "expmech_lower_target",
    "generic_lower_failure",
    "lower_target_rank",
    "nonprivate_ranks",
]

#: Relative safety margin against floating rounding in the comparison F(k) ≤ α/2.
_ROUNDING_MARGIN = 1e-9

TailBound = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def nonprivate_ranks(n: int, alpha: float) -> tuple[int, int]:
    """Exact binomial ranks (1-based) of the classical interval [x_(kL), x_(kU)].

    kL is the largest k with P(B ≤ k − 1) ≤ α/2 (= P(med < x_(k))), kU = n + 1 − kL.
    (:func:`dpfair.quantiles.nonprivate_interval` has the general quantile version.)

    Raises
    ------
    InsufficientDataError
        If even k = 1 fails, i.e. 2^{-n} > α/2: no interval from this sample can have the
        requested coverage.
    """
    half = alpha / 2.0
    # P(B ≤ k − 1) ≤ α/2  ⇔  k − 1 ≤ ppf-like bound; search the exact cdf.
    # Start at the normal approximation; the two exact searches below end at the same k
    # from any start (SciPy is not imported: the command line starts faster).
    k = min(max(int(n / 2.0 + NormalDist().inv_cdf(half) * math.sqrt(n) / 2.0), 0), n)
    # Largest j with cdf(j) ≤ half, then kL = j + 1.
    while k >= 0 and _binom_cdf(k, n) > half:
        k -= 1
    while k + 1 <= n and _binom_cdf(k + 1, n) <= half:
        k += 1
    k_low = k + 1
    if k_low < 1:
        needed = math.ceil(math.log2(2.0 / alpha))
        raise InsufficientDataError(
            f"n={n} is too small for a {1 - alpha:.4g}-confidence interval (alpha={alpha:g}): "
            f"even the sample range covers the median with probability below 1 − alpha. "
            f"Use at least n={needed} records or a larger alpha."
        )
    return k_low, n + 1 - k_low


def _binom_cdf(k: ArrayLike, n: int, p: float = 0.5) -> Any:
    """P(B ≤ k) for B ~ Bin(n, p), any integer k (0 below the support, 1 above).

    :func:`dpfair.median._binomial.binom_cdf` (NumPy only; why it gives the same targets as
    SciPy's ``bdtr`` is argued there).
    """
    return binom_cdf(k, n, p)


def _binom_sf(k: ArrayLike, n: int, p: float = 0.5) -> Any:
    """P(B > k) for B ~ Bin(n, p), any integer k (:func:`~dpfair.median._binomial.binom_sf`)."""
    return binom_sf(k, n, p)


def _log_pmf(m: NDArray[np.float64], n: int, p: float = 0.5) -> NDArray[np.float64]:
    """log P(B = m) for B ~ Bin(n, p); −inf off the support and for non-integer m
    (:func:`~dpfair.median._binomial.binom_log_pmf`, Loader's saddle-point form)."""
    return binom_log_pmf(m, n, p)


def _window(n: int, p: float) -> tuple[float, int]:
    """(centre n·p, half-width 20 sd + 2) of the window where Bin(n, p) has its mass.

    For p = 1/2 this is (n/2, ⌈20·√n/2⌉ + 2) exactly (√(n/4) = √n/2 in binary64).
    """
    return n * p, math.ceil(20.0 * math.sqrt(n * p * (1.0 - p))) + 2


def expmech_lower_failure(
    n: int, epsilon: float, band_ratio: float, ks: ArrayLike, p: float = 0.5
) -> NDArray[np.float64]:
    r"""F(k) for the exponential mechanism's tail, for every k in ``ks`` at once.

    B ~ Bin(n, p): p = 1/2 for the median, p = q for the lower end of the q-quantile (the
    upper end uses 1 − q and the mirror rank, see :mod:`dpfair.quantiles`).

    ``tail(t) = min(1, C·e^{−εt/2})`` with C = ``band_ratio``. Let t0 be the largest t
    with C·e^{−εt/2} ≥ 1 (0 if C ≤ 1). Then

    .. math:: F(k) = P(B ≤ k + t_0) + C e^{εk/2} \sum_{m > k + t_0} P(B=m) e^{-εm/2},

    and the geometric kernel factorises, so the suffix sums
    S(j) = Σ_{m ≥ j} P(B=m)·e^{−ε(m − c)/2} (c = n/2, for scale) are computed once, in
    log-space, over the window of m where the binomial has mass (±20 standard deviations;
    the mass outside is < 1e-170 and is added as an upper bound). Each F(k) is then O(1):
    the whole curve costs O(n) instead of the O(n²) double loop.
    """
    k_arr = np.asarray(ks, dtype=np.int64)
    t0 = _expmech_t0(n, epsilon, band_ratio)
    centre, half_width = _window(n, p)
    m_lo = max(0, math.floor(centre) - half_width)
    m_hi = min(n, math.ceil(centre) + half_width)
    m = np.arange(m_lo, m_hi + 1, dtype=np.float64)
    log_terms = _log_pmf(m, n, p) - epsilon * (m - centre) / 2.0
    log_suffix = np.logaddexp.accumulate(log_terms[::-1])[::-1]  # S(m_lo..m_hi)
    outside = float(_binom_cdf(m_lo - 1, n, p) + _binom_sf(m_hi, n, p))

    start = k_arr + t0 + 1  # first m with tail < 1
    idx = np.clip(start - m_lo, 0, log_suffix.size)
    padded = np.concatenate((log_suffix, [-np.inf]))
    log_s = padded[idx]
    with np.errstate(over="ignore"):
        geometric = band_ratio * np.exp(np.minimum(epsilon * (k_arr - centre) / 2.0 + log_s, 700.0))
    # P(B ≤ j) from the window's running sum (absolute error ~1e-16), exact binomial cdf
    # for the rare j outside the window.
    window_cdf = float(_binom_cdf(m_lo - 1, n, p)) + np.cumsum(
        np.exp(log_terms + epsilon * (m - centre) / 2.0)
    )
    j = k_arr + t0
    inside = (j >= m_lo) & (j <= m_hi)
    cdf_part = np.empty(j.shape, dtype=np.float64)
    cdf_part[inside] = window_cdf[j[inside] - m_lo]
    if not inside.all():
        cdf_part[~inside] = _binom_cdf(j[~inside], n, p)
    # Terms with m outside the window have tail < 1, so together they add at most the
    # binomial mass outside the window: add it as a (negligible) upper bound.
    out = cdf_part + geometric + outside
    return np.minimum(np.asarray(out, dtype=np.float64), 1.0)


def _expmech_t0(n: int, epsilon: float, band_ratio: float) -> int:
    """t0 = ⌊2·ln(C)/ε⌋ (0 if C ≤ 1), capped at n.

    The cap changes nothing: F(k) ≥ P(B ≤ k + t0), which is 1 as soon as t0 ≥ n. It keeps a
    tiny ε (e.g. ρ = 1e-300) from overflowing the integer arithmetic.
    """
    if band_ratio <= 1.0:
        return 0
    t0 = 2.0 * math.log(band_ratio) / epsilon
    return n if not t0 < n else math.floor(t0)


def expmech_lower_target(
    n: int, epsilon: float, band_ratio: float, alpha_half: float, p: float = 0.5
) -> int:
    """Largest k in {0..n} with F(k) ≤ α/2 for the ExpMech tail, or −1 if none.

    F is evaluated once for every candidate in the window where the binomial has mass
    (vectorised, O(√n)); below that window F(k) = C·e^{ε(k−c)/2}·S_all up to a
    < 1e-170 remainder that is added, which has a closed-form solution in k.
    """
    limit = alpha_half * (1.0 - _ROUNDING_MARGIN)
    t0 = _expmech_t0(n, epsilon, band_ratio)
    if t0 >= n:  # F(k) ≥ P(B ≤ k + t0) = 1 for every k: no rank qualifies
        return -1
    centre, half_width = _window(n, p)
    k_first = max(0, math.floor(centre) - half_width - t0 - 1)
    ks = np.arange(
        k_first,
        n + 1
        if n - k_first < 4 * half_width + 8
        else min(n, math.ceil(centre) + half_width) + 1,
    )
    values = expmech_lower_failure(n, epsilon, band_ratio, ks, p)
    ok = np.flatnonzero(values <= limit)
    if ok.size and ok[-1] == ks.size - 1 and ks[-1] < n:
        # F is still below the limit at the window's end (cannot happen for alpha < 1,
        # since F(k) ≥ P(B ≤ k)); be safe and scan the rest by bisection.
        return lower_target_rank(
            lambda k: float(expmech_lower_failure(n, epsilon, band_ratio, [k], p)[0]), n,
            alpha_half,
        )
    if ok.size:
        return int(ks[ok[-1]])
    if k_first == 0:
        return -1
    # Below the window: F(k) ≈ C·exp(ε(k − c)/2)·S_all + remainder, increasing in k.
    return lower_target_rank(
        lambda k: float(expmech_lower_failure(n, epsilon, band_ratio, [k], p)[0]), k_first,
        alpha_half,
    )


def generic_lower_failure(
    n: int, tail: TailBound, k: int, *, t_max: int, p: float = 0.5
) -> float:
    r"""F(k) = P(B ≤ k) + Σ_{t ≥ 1} P(B = k + t)·tail(t) for a general decreasing ``tail``.

    Terms with t > ``t_max`` are bounded by P(B > k + t_max)·tail(t_max + 1) (tail is
    non-increasing), so the value returned is an upper bound that is exact up to that
    (negligible, caller-chosen) remainder. Cost O(t_max).
    """
    t = np.arange(1, t_max + 1, dtype=np.float64)
    m = k + t
    pmf = np.exp(_log_pmf(m, n, p))
    tails = np.minimum(tail(t), 1.0)
    remainder = float(_binom_sf(k + t_max, n, p)) * float(
        min(1.0, tail(np.array([t_max + 1.0]))[0])
    )
    return float(_binom_cdf(k, n, p) + np.dot(pmf, tails) + remainder)


def lower_target_rank(failure: Callable[[int], float], n: int, alpha_half: float) -> int:
    """Largest k in {0, …, n} with ``failure(k) ≤ alpha_half``, by bisection (F is monotone).

    Returns −1 if no k qualifies.
    """
    limit = alpha_half * (1.0 - _ROUNDING_MARGIN)
    if failure(0) > limit:
        return -1
    lo, hi = 0, n  # invariant: failure(lo) ≤ limit
    if failure(hi) <= limit:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if failure(mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def gaussian_union_tail(sigma: float, n_queries: int) -> TailBound:
    """tail(t) = min(1, Q·Φ̄(t/σ)): a union bound over Q Gaussian comparisons."""

    def tail(t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.minimum(1.0, n_queries * special.ndtr(-np.asarray(t) / sigma))

    return tail

r"""The four interval methods of paper 004 for any quantile level q, end by end.

Let x_q = inf{x : F(x) ≥ q} be the population q-quantile. Each method below is the
median's method (:mod:`dpfair.median`) with the binomial law Bin(n, 1/2) replaced by the
law of the relevant count, and with a miscoverage budget per end:

* lower end L fails iff L > x_q. With B = #{x_i ≤ x_q} ~ Bin(n, F(x_q)), F(x_q) ≥ q
  (= q for continuous P), the median's conditional argument gives
  P(L > x_q) ≤ F_p(k) := P(B ≤ k) + Σ_{m>k} P(B = m)·tail(m − k) with B ~ Bin(n, p), p = q;
  F_p is non-increasing in B, and Bin(n, F(x_q)) is stochastically larger than Bin(n, q),
  so atoms only make it smaller.
* upper end U fails iff U < x_q. With B⁻ = #{x_i < x_q} ~ Bin(n, F(x_q−)), F(x_q−) ≤ q,
  failure needs a rank error ≥ k_U − B⁻; with B' = n − B⁻ (stochastically larger than
  Bin(n, 1 − q)) and k' = n − k_U this is the lower-end bound F_{1−q}(k'). So
  k_U = n − (the lower target for 1 − q): the two ends are no longer mirror images.

For q = 1/2 and equal per-end levels α/2 every function here reproduces the median's
computation step for step (same target ranks, same noise draws in the same order), so
``dpfair.quantiles.confidence_interval(x, 0.5, ...)`` equals
``dpfair.median.confidence_interval(x, ...)`` for the same seed (tested).

An end with no valid target rank (possible for extreme q and small n: e.g. a lower end
for q = 0.01 at n = 100) is set to the public bound, which is valid because x_q is
promised to lie in R; that end spends no budget (reported in the diagnostics).
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.mechanisms import (
    ExponentialMechanism,
    GaussianMechanism,
    LatticeNoise,
    NoisyBinaryTree,
    leaf_edges,
)
from dpfair.median import _cdf as median_cdf
from dpfair.median._expmech import CellGrid, SortedCounts, sample_order_statistic_cell
from dpfair.median._ranks import (
    _ROUNDING_MARGIN,
    _binom_cdf,
    _binom_sf,
    _expmech_t0,
    _log_pmf,
    _window,
    expmech_lower_failure,
    expmech_lower_target,
    gaussian_union_tail,
    generic_lower_failure,
    lower_target_rank,
)
from dpfair.median._result import DPCdf
from dpfair.privacy import Accountant, Budget


def mixture_sf(c: Any, sigma: Any, n: int, p: float, *, sigma_above: Any = None) -> Any:
    """P(B + N(0, σ²) > c), B ~ Bin(n, p): the median's mixture tail at level p."""
    return median_cdf.mixture_sf(c, sigma, n, sigma_above=sigma_above, p=p)


def envelope_threshold(n: int, p: float, sigma_min: float, sigma_max: float,
                       level: float) -> float:
    """The envelope threshold of a data-chosen range at level p (``median._cdf``)."""
    return median_cdf._envelope_threshold(n, sigma_min, sigma_max, level, p=p)

__all__ = [
    "binsearch_quantile",
    "binsearch_quantiles",
    "binsearch_targets",
    "cdf_quantiles",
    "expmech_lower_failure_exact",
    "expmech_lower_target_exact",
    "expmech_lower_targets_exact",
    "expmech_quantile",
    "expmech_targets",
    "grid_point",
    "grid_points",
]


# ---------------------------------------------------------------------------- ExpMech
#: Beyond t with C·e^{−εt/2} ≤ 1e-8 the exact-law tail x/(1 + x) is replaced by its upper
#: bound x (relative cost ≤ 1e-8), which keeps the geometric closed form for the far tail.
_EXACT_TAIL_CUTOFF = 8.0 * math.log(10.0)
#: Above this many (window × kernel) products the exact-law tail falls back to the
#: min(1, C·e^{−εt/2}) bound (valid, more conservative): tiny ε at huge n only.
_EXACT_TAIL_WORK = 50_000_000


@functools.lru_cache(maxsize=64)
def _window_log_pmf(n: int, p: float, m_lo: int, m_hi: int
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(m, log P(B = m)) over the window m_lo..m_hi, cached (read-only arrays).

    The same window serves every tail constant and ε (the width model's candidates).
    """
    m = np.arange(m_lo, m_hi + 1, dtype=np.float64)
    log_pmf = np.asarray(_log_pmf(m, n, p), dtype=np.float64)
    m.setflags(write=False)
    log_pmf.setflags(write=False)
    return m, log_pmf


def expmech_lower_failure_exact(n: int, epsilon: float, band_ratio: float, ks: Any,
                                p: float = 0.5) -> NDArray[np.float64]:
    r"""F(k) = E[h(B − k)], B ~ Bin(n, p), with the exact worst-case conditional miss h.

    :func:`dpfair.median._ranks.expmech_lower_failure` bounds the conditional miss
    probability given a rank error of t ≥ 1 by min(1, C·e^{−εt/2}). The exponential
    mechanism's output law gives the exact worst case instead. The drawn piece j has
    probability len_j e^{−ε|j−k|/2} / Z; the miss event needs |j − k| ≥ t. The pieces with
    |j − k| ≥ t have total length L ≤ |R| − band and weight ≤ e^{−εt/2}, the band piece
    (score 0, length ≥ band) is in Z but not in the numerator, so with N the numerator

    .. math:: P(\text{miss} \mid B = k + t) ≤ \frac{N}{N + \text{band}}
              ≤ \frac{x_t}{1 + x_t},\qquad x_t = C e^{−εt/2},\; C = (|R| − band)/band,

    (x ↦ x/(1 + x) is increasing), attained by data whose records beyond rank k + t sit in
    one clump at the far end. So h(t) = 1 for t ≤ 0 and x_t/(1 + x_t) for t ≥ 1: never
    above min(1, x_t), about half of it where x_t ≈ 1 (one or two ranks closer to the
    classical target at the paper setting). h is non-increasing, so F is non-decreasing
    in k and the same largest-valid-rank search applies.

    Computation: P(B ≤ k) exactly; the terms t = 1..T (T the first t with
    x_t ≤ 1e-8) as one correlation of the binomial pmf with h over the window where the
    binomial has mass (±20 sd); the terms t > T with the upper bound x_t (the geometric
    closed form of ``expmech_lower_failure``); the binomial mass outside the window is
    added as a bound (each term ≤ 1). Every approximation errs upward, so a rank with
    F(k) ≤ level is valid.
    """
    k_arr = np.atleast_1d(np.asarray(ks, dtype=np.int64))
    c = float(band_ratio)
    centre, half_width = _window(n, p)
    m_lo = max(0, math.floor(centre) - half_width)
    m_hi = min(n, math.ceil(centre) + half_width)
    if c <= 0.0:  # one piece: the band is the whole range, no miss beyond rank k
        return np.minimum(np.asarray(_binom_cdf(k_arr, n, p), dtype=np.float64), 1.0)
    t_cut = 2.0 * (math.log(c) + _EXACT_TAIL_CUTOFF) / epsilon
    big = not t_cut < n
    if big or (m_hi - m_lo + 1) * math.ceil(t_cut) > _EXACT_TAIL_WORK:
        return expmech_lower_failure(n, epsilon, c, k_arr, p)
    t_max = max(1, math.ceil(t_cut))
    m, log_pmf = _window_log_pmf(n, p, m_lo, m_hi)
    pmf = np.exp(log_pmf)
    t = np.arange(1, t_max + 1, dtype=np.float64)
    with np.errstate(over="ignore"):
        x = c * np.exp(-epsilon * t / 2.0)
    h = x / (1.0 + x)
    h[~np.isfinite(x)] = 1.0
    # near(k) = Σ_{t=1..T} pmf(k + t)·h(t) = conv[k − m_lo + T], k = m_lo − T .. m_hi − 1
    conv = np.convolve(pmf, h[::-1])
    idx = k_arr - m_lo + t_max
    ok = (idx >= 0) & (idx < conv.size)
    near = np.zeros(k_arr.shape, dtype=np.float64)
    near[ok] = conv[idx[ok]]
    # far(k) = Σ_{m > k + T, m in window} pmf(m)·C·e^{−ε(m − k)/2} (geometric closed form)
    log_terms = log_pmf - epsilon * (m - centre) / 2.0
    log_suffix = np.concatenate((np.logaddexp.accumulate(log_terms[::-1])[::-1], [-np.inf]))
    start = np.clip(k_arr + t_max + 1 - m_lo, 0, log_suffix.size - 1)
    with np.errstate(over="ignore"):
        far = c * np.exp(np.minimum(epsilon * (k_arr - centre) / 2.0 + log_suffix[start],
                                    700.0))
    outside = float(_binom_cdf(m_lo - 1, n, p) + _binom_sf(m_hi, n, p))
    out = np.asarray(_binom_cdf(k_arr, n, p), dtype=np.float64) + near + far + outside
    return np.minimum(out, 1.0)


@functools.lru_cache(maxsize=4096)
def expmech_lower_target_exact(n: int, epsilon: float, band_ratio: float,
                               alpha_half: float, p: float = 0.5) -> int:
    """Largest k in {0..n} with :func:`expmech_lower_failure_exact` ≤ level, or −1.

    A pure function of public values, cached (both ends of q = 1/2 share it). The rank is
    that of the reference computation (:func:`_expmech_lower_target_reference`, F on the
    whole window), found by :func:`expmech_lower_targets_exact` from F on a few ranks
    around the crossing with a certified margin, and by the reference itself whenever
    that certificate fails.
    """
    return expmech_lower_targets_exact(n, epsilon, (float(band_ratio),), alpha_half, p)[0]


def _expmech_lower_target_reference(n: int, epsilon: float, band_ratio: float,
                               alpha_half: float, p: float = 0.5) -> int:
    """Largest k in {0..n} with :func:`expmech_lower_failure_exact` ≤ level, or −1.

    The reference computation (F on the whole window): :func:`expmech_lower_target_exact`
    returns the same rank, faster, and calls this when its certificate fails.

    Every candidate in the window where F can cross the level is evaluated at once; when
    none there qualifies, the min(1, ·)-bound search of
    :func:`dpfair.median._ranks.expmech_lower_target` answers (also valid: its F is larger).
    """
    limit = alpha_half * (1.0 - _ROUNDING_MARGIN)
    t0 = _expmech_t0(n, epsilon, band_ratio)
    if t0 >= n:
        return -1
    centre, half_width = _window(n, p)
    k_first = max(0, math.floor(centre) - half_width - t0 - 1)
    k_last = min(n, math.ceil(centre) + half_width)
    ks = np.arange(k_first, k_last + 1)
    values = expmech_lower_failure_exact(n, epsilon, band_ratio, ks, p)
    ok = np.flatnonzero(values <= limit)
    if ok.size and not (ok[-1] == ks.size - 1 and ks[-1] < n):
        return int(ks[ok[-1]])
    return expmech_lower_target(n, epsilon, band_ratio, alpha_half, p)


#: Relative margin of the certified rank searches (:func:`expmech_lower_targets_exact`,
#: :func:`_binsearch_lower_target`): a decision F(k) ≤ level is taken from the fast
#: evaluation only when it holds with this margin, far above the two computations' gap
#: (a few 1e-12 relatively, see :func:`expmech_lower_targets_exact`).
_CERTIFY_TOL = 1e-8
#: Largest (ranks × kernel) block of one matrix product in the certified search.
_CERTIFY_BLOCK = 1 << 20


def _chernoff_outside(n: int, p: float, m_lo: int, m_hi: int) -> float:
    """An upper bound on P(B < m_lo) + P(B > m_hi), B ~ Bin(n, p) (Chernoff, ×2 slack).

    P(B ≤ a) ≤ e^{−n·KL(a/n ‖ p)} for a ≤ np and P(B ≥ b) ≤ e^{−n·KL(b/n ‖ p)} for
    b ≥ np (KL the Bernoulli relative entropy).
    """
    if not 0.0 < p < 1.0:
        return 1.0

    def kl(x: float) -> float:
        out = 0.0
        if x > 0.0:
            out += x * math.log(x / p)
        if x < 1.0:
            out += (1.0 - x) * math.log((1.0 - x) / (1.0 - p))
        return max(out, 0.0)

    total = 0.0
    if m_lo > 0:
        a = (m_lo - 1) / n
        total += math.exp(-n * kl(a)) if a < p else 1.0
    if m_hi < n:
        b = (m_hi + 1) / n
        total += math.exp(-n * kl(b)) if b > p else 1.0
    return 2.0 * total


def _window_half_width(n: int, p: float, limit: float, below: int | None = None) -> int:
    """Half width of the certified searches' pmf window around n·p (public).

    10 sd (+2), or 20 sd when the mass outside 10 sd (its Chernoff bound) is not
    negligible against the margin at ``limit``, or a power of two reaching ``below``.
    """
    sd = math.sqrt(n * p * (1.0 - p))
    half = math.ceil(10.0 * sd) + 2
    centre = n * p
    lo, hi = max(0, math.floor(centre) - half), min(n, math.ceil(centre) + half)
    if _chernoff_outside(n, p, lo, hi) > 1e-4 * _CERTIFY_TOL * limit:
        half = math.ceil(20.0 * sd) + 2
    if below is not None and centre - below + 16 > half:
        half = 1 << math.ceil(math.log2(centre - below + 16))
    return half


@functools.lru_cache(maxsize=32)
def _window_pmf_core(n: int, p: float, half_width: int
                     ) -> tuple[int, int, NDArray[np.float64]]:
    """(m_lo, m_hi, P(B = m) for m = m_lo..m_hi), B ~ Bin(n, p), ±half_width around n·p.

    P at the window's mode from :func:`dpfair.median._binomial.binom_log_pmf`, the rest
    by running products of the exact ratios P(m + 1)/P(m) = (n − m)/(m + 1)·p/(1 − p)
    outwards from it: each value within (2j + 2)·2^-53 (j steps from the mode) of the
    exact product, i.e. ≤ 2^-38 relatively in a window of ≤ 2^14 ranks per side beyond
    which the direct evaluation is used (cost: one log-pmf instead of one per rank).
    """
    m_lo = max(0, math.floor(n * p) - half_width)
    m_hi = min(n, math.ceil(n * p) + half_width)
    ks = np.arange(m_lo, m_hi + 1, dtype=np.float64)
    mode = min(max(math.floor((n + 1) * p), m_lo), m_hi)
    if not 0.0 < p < 1.0 or max(mode - m_lo, m_hi - mode) > 2**14 or ks.size < 3:
        pmf = np.exp(_log_pmf(ks, n, p))
    else:
        odds = p / (1.0 - p)
        # P(m + 1)/P(m), m = m_lo..m_hi − 1: (n − m)/(m + 1)·odds, in place (the same
        # operations in the same order, fewer temporaries)
        ratio = np.subtract(n, ks[:-1])
        np.divide(ratio, ks[:-1] + 1.0, out=ratio)
        np.multiply(ratio, odds, out=ratio)
        top = mode - m_lo
        pmf = np.empty(ks.size)
        peak = math.exp(float(_log_pmf(np.array([float(mode)]), n, p)[0]))
        pmf[top] = peak
        if top + 1 < ks.size:
            upper = pmf[top + 1:]
            np.cumprod(ratio[top:], out=upper)
            np.multiply(peak, upper, out=upper)
        if top > 0:
            inv = np.divide(1.0, ratio[:top][::-1])
            np.cumprod(inv, out=inv)
            np.multiply(peak, inv, out=inv)
            pmf[:top] = inv[::-1]
    pmf.setflags(write=False)
    return m_lo, m_hi, pmf


#: Bin(n, p) is evaluated as Bin(n, p') with p' = 1 − fl(1 − p) (p < 1/2; the mirror
#: image of Bin(n, fl(1 − p)) for p > 1/2), so that both ends of a quantile share one
#: pmf, when the parameter's change moves the pmf by less than this, relatively.
_MIRROR_ERROR = 1e-11


@functools.lru_cache(maxsize=32)
def _window_sums(n: int, p: float, half_width: int
                 ) -> tuple[int, int, NDArray[np.float64], NDArray[np.float64], float]:
    """(m_lo, m_hi, pmf, running sum of pmf, bound on the mass outside) of the window.

    About ±``half_width`` around n·p (:func:`_window_half_width`; the certified searches
    add the Chernoff bound on the mass outside to their margin); cached, read-only. The
    pmf is that of Bin(n, p'), p' the ≤ 1/2 side shared by p and 1 − p (for p > 1/2 the
    mirror image m ↦ n − m): |p' − p| ≤ 2^-53, which moves log P(B = m) by at most
    |m − np|/(p(1 − p))·2^-53 ≤ half_width/(p(1 − p))·2^-52 (+ rounding), used only
    while that is below :data:`_MIRROR_ERROR`, far inside the certificate's margin.
    """
    side = 1.0 - p if p > 0.5 else 1.0 - (1.0 - p)
    if half_width / (p * (1.0 - p)) * 2.0**-52 < _MIRROR_ERROR:
        c_lo, c_hi, core = _window_pmf_core(n, side, half_width)
        if p > 0.5:
            m_lo, m_hi, pmf = n - c_hi, n - c_lo, core[::-1]
        else:
            m_lo, m_hi, pmf = c_lo, c_hi, core
    else:
        m_lo, m_hi, pmf = _window_pmf_core(n, p, half_width)
    cdf = np.cumsum(pmf)
    cdf.setflags(write=False)
    return m_lo, m_hi, pmf, cdf, _chernoff_outside(n, p, m_lo, m_hi)


def _certified_crossing(values: NDArray[np.float64], limit: float, slack: float, tol: float
                        ) -> int | None:
    """Index i of the crossing in ``values`` (F on consecutive ranks), or None.

    i is the last index whose value certainly lies at or below ``limit`` (v·(1 + tol) +
    slack ≤ limit) with every later value certainly above it (v·(1 − tol) > limit) and at
    least one later value; None when the crossing is not certified inside ``values``.
    """
    below = values * (1.0 + tol) + slack <= limit
    above = values * (1.0 - tol) > limit
    if not below[0]:
        return None
    i = int(np.flatnonzero(below)[-1])
    if i + 1 >= values.size or not above[i + 1:].all():
        return None
    return i


def expmech_lower_targets_exact(n: int, epsilon: float, band_ratios: tuple[float, ...],
                                alpha_half: float, p: float = 0.5) -> tuple[int, ...]:
    r""":func:`expmech_lower_target_exact` for several tail constants C at once.

    Returns, for every C, the rank of the reference computation
    (:func:`_expmech_lower_target_reference`), which evaluates F = E[h(B − k)] on the
    whole ±20 sd window (a correlation of ~40 sd × T products per C). Here F is evaluated
    only on the ranks where it can cross the level, for every C in one matrix product:

    * the ranks: F(k) ≥ P(B ≤ k), so F > level above k_top = max{k : P(B ≤ k) ≤ level};
      and F(k) ≤ P(B ≤ k + s) + h(s + 1) with h(s + 1) ≤ C·e^{−ε(s+1)/2} ≤ level/100,
      so F < level well below k_top' − s (k_top' the rank of 0.98·level). So the crossing
      lies in [k_top' − s − 1, k_top + 1], about 2·ln(100·C/level)/ε ranks;
    * F there: P(B ≤ k) from the window's running pmf sum, the near terms
      Σ_{t ≤ T} P(B = k + t)·h(t) as a matrix product, the far terms by a suffix sum in
      linear space: the same terms as the reference's, in another summation order, minus
      the mass outside the window (≤ a Chernoff bound, :func:`_chernoff_outside`).

    **Why the rank is the reference's.** Both computations approximate the same function
    F_w (F with the window's truncation), which is non-decreasing in k (h is
    non-increasing, and the far kernel C·e^{−εt/2} starts below h(T) when ε ≥ 2·10⁻⁸,
    which ``t_cut < n`` implies for the n served here), each within a relative ~1e-12
    (sums of ≤ 4·10⁴ positive terms with relative errors ≤ 6.2e-14·(1 + |ln P|) each,
    :mod:`dpfair.median._binomial`; h's rounding a few ulps) plus the outside mass. A
    rank k* is returned only if F(k*) is below the level and F(k* + 1), ..., at the
    bracket's top, above it, each by the relative margin :data:`_CERTIFY_TOL` = 1e-8
    (and the outside bound): then the reference's values satisfy the same comparisons,
    and (F_w monotone) every larger rank in its window is above the level, so its
    answer — the largest qualifying rank of its window — is k* (k* is checked to lie
    strictly inside that window, so its fallbacks do not apply). Any other case (no
    certified crossing, a constant C ≤ 0, the reference's bound-law branches for tiny ε)
    runs the reference itself. Validity is the reference's: F(k*) ≤ level.
    """
    eps = float(epsilon)
    cs = [float(c) for c in band_ratios]
    out: list[int | None] = [None] * len(cs)
    limit = alpha_half * (1.0 - _ROUNDING_MARGIN)
    centre, half_width = _window(n, p)
    m_lo = max(0, math.floor(centre) - half_width)
    m_hi = min(n, math.ceil(centre) + half_width)
    size = m_hi - m_lo + 1
    fast: list[int] = []
    t_maxs: dict[int, int] = {}
    for i, c in enumerate(cs):
        if not (c > 0.0 and math.isfinite(c) and eps > 0.0 and 1e-250 < limit < 0.5):
            continue
        if _expmech_t0(n, eps, c) >= n:
            continue
        t_cut = 2.0 * (math.log(c) + _EXACT_TAIL_CUTOFF) / eps
        if not t_cut < n or size * math.ceil(t_cut) > _EXACT_TAIL_WORK:
            continue
        fast.append(i)
        t_maxs[i] = max(1, math.ceil(t_cut))
    if fast:
        w_lo, w_hi, pmf, cdf, outside = _window_sums(n, p, _window_half_width(n, p, limit))
        j_top = int(np.searchsorted(cdf, limit, side="right")) - 1
        j_low = int(np.searchsorted(cdf, 0.98 * limit, side="right")) - 1
        c_max = max(cs[i] for i in fast)
        s = max(0, math.ceil(2.0 * math.log(100.0 * c_max / limit) / eps))
        bottom = w_lo + j_low - s - 1
        top = w_lo + j_top + 1
        if j_low >= 0 and bottom < w_lo and bottom > 0:  # a wider window reaches it
            w_lo, w_hi, pmf, cdf, outside = _window_sums(
                n, p, _window_half_width(n, p, limit, bottom))
        if (j_low >= 0 and w_lo <= bottom < top <= w_hi
                and eps * (top - bottom) / 2.0 < 600.0):
            _certify_expmech(n, eps, cs, fast, t_maxs, p, limit, pmf, cdf, outside,
                             w_lo, w_hi, bottom, top, out)
    for i, c in enumerate(cs):
        if out[i] is None:
            out[i] = _expmech_lower_target_reference(n, eps, c, alpha_half, p)
    return tuple(int(k) for k in out if k is not None)


def _certify_expmech(n: int, eps: float, cs: list[float], fast: list[int],
                     t_maxs: dict[int, int], p: float, limit: float,
                     pmf: NDArray[np.float64], cdf: NDArray[np.float64], outside: float,
                     m_lo: int, m_hi: int, bottom: int, top: int,
                     out: list[int | None]) -> None:
    """Fill ``out[i]`` for the C's in ``fast`` whose crossing is certified on [bottom, top]."""
    ks = np.arange(bottom, top + 1)
    nk = ks.size
    t_big = max(t_maxs[i] for i in fast)
    tol = max(_CERTIFY_TOL, 8.0 * (t_big + 64) * 2.0**-53)
    # near(k, C) = Σ_{t=1..T_C} pmf(k + t)·h_C(t): rows k, a zero-padded pmf window
    padded = np.zeros(pmf.size + t_big + 1)
    padded[: pmf.size] = pmf
    rows = np.lib.stride_tricks.sliding_window_view(padded[bottom + 1 - m_lo:], t_big)[:nk]
    t = np.arange(1, t_big + 1, dtype=np.float64)
    c_vec = np.array([cs[i] for i in fast])
    t_vec = np.array([t_maxs[i] for i in fast])
    with np.errstate(over="ignore"):
        x = c_vec[:, None] * np.exp(-eps * t / 2.0)[None, :]  # h_C(t), as the reference
    kern = x / (1.0 + x)
    kern[~np.isfinite(x)] = 1.0
    kern[t[None, :] > t_vec[:, None]] = 0.0
    near = np.empty((nk, len(fast)))
    step = max(1, _CERTIFY_BLOCK // t_big)
    for a in range(0, nk, step):
        near[a : a + step] = rows[a : a + step] @ kern.T
    # far(k, C) = C·Σ_{m > k + T_C, m ≤ m_hi} pmf(m)·e^{−ε(m − k)/2}, by a suffix sum from
    # m_ref = bottom in linear space (terms ≤ pmf there: no overflow)
    m_arr = np.arange(bottom, m_hi + 1, dtype=np.float64)
    w = pmf[bottom - m_lo:] * np.exp(-eps * (m_arr - bottom) / 2.0)
    suffix = np.concatenate((np.cumsum(w[::-1])[::-1], [0.0]))
    lift = np.exp(eps * (ks - bottom) / 2.0)
    start = np.minimum(ks[:, None] + t_vec[None, :] + 1 - bottom, suffix.size - 1)
    far = c_vec[None, :] * lift[:, None] * suffix[start]
    values = cdf[ks - m_lo][:, None] + near + far
    # the certified crossing of every column (see _certified_crossing)
    below = values * (1.0 + tol) + 2.0 * outside <= limit
    above = values * (1.0 - tol) > limit
    last = nk - 1 - np.argmax(below[::-1], axis=0)
    above_after = np.logical_and.accumulate(above[::-1], axis=0)[::-1]
    centre, half_width = _window(n, p)
    k_last = min(n, math.ceil(centre) + half_width)
    for j, i in enumerate(fast):
        idx = int(last[j])
        if not below[0, j] or idx + 1 >= nk or not above_after[idx + 1, j]:
            continue
        k_star = int(ks[idx])
        k_first = max(0, math.floor(centre) - half_width - _expmech_t0(n, eps, cs[i]) - 1)
        if k_first <= k_star < k_last:
            out[i] = k_star


@functools.lru_cache(maxsize=1024)
def expmech_targets(n: int, epsilon: float, tail_constant: float, p: float,
                    alpha_low: float, alpha_high: float, exact: bool = False
                    ) -> tuple[int | None, int | None]:
    """(k_L, k_U) of ExpMech for level p (``None`` for an end with no valid rank).

    A pure function of public values (n, ε, C, p, the two levels), cached. ``exact=True``
    uses the exact worst-case conditional law (:func:`expmech_lower_failure_exact`)
    instead of the min(1, C·e^{−εt/2}) tail bound: the same or closer ranks.
    """
    target = expmech_lower_target_exact if exact else expmech_lower_target
    k_low = target(n, epsilon, tail_constant, alpha_low, p)
    k_mirror = target(n, epsilon, tail_constant, alpha_high, 1.0 - p)
    return (k_low if k_low >= 0 else None), (n - k_mirror if k_mirror >= 0 else None)


def expmech_quantile(
    x_sorted: NDArray[np.float64] | SortedCounts,
    p: float,
    rho: float,
    bounds: tuple[float, float],
    alpha_low: float,
    alpha_high: float,
    granularity: float,
    rng: np.random.Generator,
    *,
    tail_constant: float | None = None,
    exact_tail: bool = False,
    padded: bool = False,
    upper: tuple[NDArray[np.float64] | SortedCounts, tuple[float, float], float] | None = None,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """ExpMech for the p-quantile: two cell-mechanism draws with ρ/2 each.

    The mechanism, its exactness as executed and the tail bound are those of
    :func:`dpfair.median._expmech.expmech_interval`; only the target ranks change (module
    docstring). ``tail_constant``, if given, must be a public upper bound on the grid's
    :attr:`~dpfair.median._expmech.CellGrid.tail_constant` (a larger C is still a valid
    tail bound): the localised stage passes one that does not depend on the data-chosen
    range, so that its ranks are data-independent. ``exact_tail=True`` computes the target
    ranks with the exact worst-case conditional law of the draw
    (:func:`expmech_lower_failure_exact`) instead of the min(1, C·e^{−εt/2}) bound.
    ``padded=True`` runs the padded cell mechanism (Q output cells beyond each end of the
    grid, :func:`~dpfair.median._expmech.sample_order_statistic_cell`), whose tail
    constant is :attr:`~dpfair.median._expmech.CellGrid.padded_tail_constant` (about
    half); the ends are still clipped to their ranges.

    ``upper=(x_upper, bounds_upper, granularity_upper)``, if given, is the data (clipped
    into ``bounds_upper``), range and θ of the UPPER end's draw, and the first three
    arguments serve the lower end only: each end may run on its own range (the localised
    stage's split ranges, :func:`dpfair.quantiles._api._localized`). Both grids must then
    satisfy the ``tail_constant`` check.

    Privacy: each draw is the exponential mechanism with ε = 2√ρ, i.e. ε²/8 = ρ/2-zCDP
    (bounded range), two draws compose to ρ-zCDP; an end without a valid rank draws
    nothing and spends nothing.
    """
    n = x_sorted.size
    x_high, bounds_high, theta_high = (x_sorted, bounds, granularity) if upper is None \
        else upper
    a, _ = bounds
    _, b = bounds_high
    grid = CellGrid.for_bounds(bounds, granularity)
    grid_high = grid if upper is None else CellGrid.for_bounds(bounds_high, theta_high)
    mech = ExponentialMechanism.for_zcdp(rho / 2.0)

    def constant(g: CellGrid) -> float:
        return g.padded_tail_constant if padded else g.tail_constant

    grid_constant = max(constant(grid), constant(grid_high))
    if tail_constant is None:
        c = grid_constant
    else:
        # The caller's C must bound this grid's constant for EVERY range it may pass (the
        # localised stage proves C_grid < K_E/2 on regular ranges, _api._localized): taking
        # max(C, C_grid) here would make the ranks depend on a data-chosen range.
        if not grid_constant <= tail_constant:
            raise RuntimeError(
                f"internal: tail_constant={tail_constant!r} is below the grid's "
                f"{grid_constant!r}; the public constant must bound every grid used."
            )
        c = float(tail_constant)
    k_low, k_high = expmech_targets(n, mech.epsilon, c, p, alpha_low, alpha_high, exact_tail)
    acct = Accountant(Budget.zcdp(rho))
    q = grid.per_theta
    low, high = a, b
    if k_low is not None:
        acct.charge(mech.privacy_zcdp, label="expmech/lower")
        cell_low = sample_order_statistic_cell(x_sorted, k_low, mech.epsilon, grid, rng,
                                               padded=padded)
        low = min(max(a, grid.edge(cell_low - q - 1)), bounds[1])
    if k_high is not None:
        acct.charge(mech.privacy_zcdp, label="expmech/upper")
        cell_high = sample_order_statistic_cell(x_high, k_high, mech.epsilon, grid_high, rng,
                                                padded=padded)
        high = max(min(b, grid_high.edge(cell_high + grid_high.per_theta + 2)), bounds_high[0])
    diagnostics: dict[str, Any] = {
        "target_ranks": (k_low, k_high),
        "epsilon_per_draw": mech.epsilon,
        "zcdp_conversion": "bounded range: eps^2/8 per draw",
        "tail_constant": c,
        "output_grid": {"cell": grid.cell, "cells": grid.n_cells, "cells_per_theta": q},
        "ledger": [(e.label, e.budget.rho) for e in acct.records],
    }
    if upper is not None or padded:
        diagnostics["output_grid"]["padded"] = padded
        diagnostics["output_grid_upper"] = {"cell": grid_high.cell, "cells": grid_high.n_cells,
                                            "cells_per_theta": grid_high.per_theta}
    return low, high, acct.spent if acct.records else Budget.zcdp(0.0), diagnostics


# ---------------------------------------------------------------------------- BinSearch
def grid_point(bounds: tuple[float, float], depth: int, j: int) -> float:
    """g_j = lo + (hi − lo)·(j/2^D), the formula of :func:`dpfair.mechanisms.leaf_edges`."""
    lo, hi = bounds
    if j <= 0:
        return float(lo)
    if j >= 1 << depth:
        return float(hi)
    return float(lo + (hi - lo) * (j / float(1 << depth)))


def _query_noise(n: int, sigma: float) -> LatticeNoise:
    """The median's query noise (public: n and σ only)."""
    return LatticeNoise.for_sigma(sigma, float(n) + 64.0 * sigma)


@functools.lru_cache(maxsize=1024)
def _binsearch_lower_target(n: int, sigma: float, depth: int, p: float, level: float) -> int:
    """Largest k with F_p(k) ≤ level for NoisyBinSearch's tail (−1: none); cached.

    A pure function of public values (n, σ, D, p, level): repeated calls (several
    quantiles, both ends of q = 1/2, a Session serving many requests) reuse it. The rank
    is the bisection's of :func:`dpfair.median._ranks.lower_target_rank` over
    :func:`~dpfair.median._ranks.generic_lower_failure` (the reference); it is read off a
    certified crossing of F on a few ranks (:func:`_binsearch_certified`) when there is
    one, which the bisection would reach too (F is non-decreasing: the kernel
    min(1, tail(t)), then tail(t_max + 1) beyond t_max, is non-increasing), and the
    reference runs otherwise.
    """
    noise = _query_noise(n, sigma)
    base = gaussian_union_tail(noise.scale, depth)

    def tail(t: NDArray[np.float64]) -> NDArray[np.float64]:
        return base(np.asarray(t, dtype=np.float64) - noise.step)

    t_max = n + 1 if not sigma * 40.0 < n else math.ceil(sigma * 40.0) + 1
    if t_max <= n:
        k = _binsearch_certified(n, tail, t_max, p, level, noise.scale, noise.step, depth,
                                 kernel=_binsearch_kernel(noise.scale, noise.step, depth,
                                                          t_max))
        if k is not None:
            return k
    return lower_target_rank(
        lambda k: generic_lower_failure(n, tail, k, t_max=t_max, p=p), n, level)


@functools.lru_cache(maxsize=256)
def _binsearch_kernel(scale: float, step: float, n_queries: int, t_max: int
                      ) -> tuple[NDArray[np.float64], float]:
    """(reversed kernel min(1, tail(t)) for t = 1..t_max, min(1, tail(t_max + 1))), cached.

    The tail of :func:`_binsearch_lower_target` (a union bound over ``n_queries``
    Gaussian comparisons at scale ``scale``, shifted by the lattice ``step``) depends on
    public values only, and not on n: a new sample size reuses it.
    """
    base = gaussian_union_tail(scale, n_queries)
    kern = np.minimum(base(np.arange(1, t_max + 1, dtype=np.float64) - step), 1.0)[::-1]
    kern = np.ascontiguousarray(kern)
    kern.setflags(write=False)
    return kern, float(min(1.0, base(np.array([t_max + 1.0]) - step)[0]))


def _binsearch_certified(n: int, tail: Any, t_max: int, p: float, level: float,
                         scale: float, step: float, n_queries: int,
                         kernel: tuple[NDArray[np.float64], float] | None = None
                         ) -> int | None:
    r"""The bisection's rank from F on the ranks where it can cross ``level``, or None.

    As in :func:`expmech_lower_targets_exact`: F(k) ≥ P(B ≤ k) puts the crossing at or
    below k_top = max{k : P(B ≤ k) ≤ level} + 1, and F(k) ≤ P(B ≤ k + s) + tail(s + 1)
    with tail(s + 1) ≤ level/100 puts it above k_top' − s − 1 (k_top' the rank of
    0.98·level). On that bracket F = P(B ≤ k) + Σ_{t ≤ t_max} P(B = k + t)·min(1, tail(t))
    (+ a remainder ≤ min(1, tail(t_max + 1))) is one convolution of the window's pmf.
    The crossing k* is returned only if F(k*) ≤ level and F(k* + 1), ... > level with
    the relative margin :data:`_CERTIFY_TOL` (and the outside and remainder bounds), so
    the reference's values, within ~1e-12 of the same non-decreasing function, satisfy
    the same comparisons at every rank its bisection visits: it returns k* as well.
    ``kernel`` (reversed kernel, remainder) is :func:`_binsearch_kernel`'s, the same
    values from ``tail``, cached.
    """
    limit = level * (1.0 - _ROUNDING_MARGIN)
    if not 1e-250 < limit < 0.5:
        return None
    m_lo, m_hi, pmf, cdf, outside = _window_sums(n, p, _window_half_width(n, p, limit))
    g_arg = 0.01 * limit / n_queries
    s = max(0, math.ceil(step + scale * -NormalDist().inv_cdf(g_arg) - 1.0)) + 1
    if float(np.minimum(tail(np.array([s + 1.0])), 1.0)[0]) > 0.011 * limit:
        return None
    j_top = int(np.searchsorted(cdf, limit, side="right")) - 1
    j_low = int(np.searchsorted(cdf, 0.98 * limit, side="right")) - 1
    bottom = m_lo + j_low - s - 1
    top = m_lo + j_top + 1
    if j_low >= 0 and bottom < m_lo and bottom > 0:  # a wider window reaches it
        m_lo, m_hi, pmf, cdf, outside = _window_sums(
            n, p, _window_half_width(n, p, limit, bottom))
    if j_low < 0 or bottom < m_lo or top > m_hi or bottom >= top:
        return None
    if kernel is None:
        kern = np.minimum(tail(np.arange(1, t_max + 1, dtype=np.float64)), 1.0)[::-1]
        remainder = float(min(1.0, tail(np.array([t_max + 1.0]))[0]))
    else:
        kern, remainder = kernel
    # pmf[bottom + 1 − m_lo : top + t_max + 1 − m_lo], zero beyond the window's end
    start, stop = bottom + 1 - m_lo, top + t_max + 1 - m_lo
    seg = pmf[start:stop] if stop <= pmf.size else np.concatenate(
        (pmf[start:], np.zeros(stop - pmf.size)))
    near = np.convolve(seg, kern, mode="valid")
    values = cdf[np.arange(bottom, top + 1) - m_lo] + near
    tol = max(_CERTIFY_TOL, 8.0 * (t_max + 64) * 2.0**-53)
    idx = _certified_crossing(values, limit, 2.0 * outside + remainder, tol)
    return None if idx is None else bottom + idx


def binsearch_targets(n: int, sigma: float, depth: int, p: float, alpha_low: float,
                      alpha_high: float) -> tuple[int | None, int | None]:
    """(k_L, k_U) of NoisyBinSearch at level p (``None``: no valid rank for that end)."""
    k_low = _binsearch_lower_target(n, sigma, depth, p, alpha_low)
    k_mirror = _binsearch_lower_target(n, sigma, depth, 1.0 - p, alpha_high)
    return (k_low if k_low >= 0 else None), (n - k_mirror if k_mirror >= 0 else None)


def binsearch_quantile(
    count_at: Any,
    n: int,
    p: float,
    rho: float,
    bounds: tuple[float, float],
    depth: int,
    alpha_low: float,
    alpha_high: float,
    rng: np.random.Generator,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """NoisyBinSearch for the p-quantile (:mod:`dpfair.median._binsearch`).

    ``count_at(j)`` returns the exact count #{x ≤ g_j} at grid index j of the 2^depth-bin
    grid over ``bounds`` (only interior indices are queried), so depths far beyond what a
    materialised grid allows (up to 2^60 bins) cost D queries per end. Privacy: each query
    is a sensitivity-1 count with exact discrete Gaussian noise, ρ/(2D)-zCDP; 2D queries
    compose to ρ (an end without a valid rank is not searched and spends nothing).
    """
    prep = _prepare_search(n, p, rho, bounds, depth, alpha_low, alpha_high, rng)
    if isinstance(prep, tuple):
        return prep
    found = {}
    for is_lower, target, z in prep.searches():
        lo, hi = 0, 1 << depth
        queries: list[tuple[float, float]] = []
        for step in range(depth):
            mid = (lo + hi) // 2
            noisy = float(count_at(mid)) + float(z[step])
            queries.append((grid_point(bounds, depth, mid), noisy))
            if (noisy <= target) if is_lower else not (noisy >= target):
                lo = mid
            else:
                hi = mid
        found[is_lower] = ((lo if is_lower else hi), queries)
    return prep.result(bounds, found)


class _Search:
    """One quantile's NoisyBinSearch after its public choices and its noise draws."""

    def __init__(self, k_low: int | None, k_high: int | None, spent: Budget, n_queries: int,
                 sigma: float, depth: int, noise: NDArray[np.float64]) -> None:
        self.k_low, self.k_high, self.spent = k_low, k_high, spent
        self.n_queries, self.sigma, self.depth, self.noise = n_queries, sigma, depth, noise

    def searches(self) -> list[tuple[bool, int, NDArray[np.float64]]]:
        """(lower end?, target rank, its D noises) per searched end, lower end first."""
        d = self.depth
        out = []
        if self.k_low is not None:
            out.append((True, self.k_low, self.noise[:d]))
        if self.k_high is not None:
            out.append((False, self.k_high, self.noise[d:]))
        return out

    def result(self, bounds: tuple[float, float],
               found: dict[bool, tuple[int, list[tuple[float, float]]]]
               ) -> tuple[float, float, Budget, dict[str, Any]]:
        d = self.depth
        i_low, q_low = found.get(True, (0, []))
        i_high, q_high = found.get(False, (1 << d, []))
        diagnostics: dict[str, Any] = {
            "target_ranks": (self.k_low, self.k_high),
            "depth": d,
            "sigma": self.sigma,
            "queries_lower": q_low,
            "queries_upper": q_high,
            "n_queries": self.n_queries,
        }
        return (grid_point(bounds, d, i_low), grid_point(bounds, d, i_high), self.spent,
                diagnostics)


@functools.lru_cache(maxsize=256)
def _search_price(rho: float, depth: int, n_queries: int) -> Budget:
    """The up-front price of a NoisyBinSearch with ``n_queries`` count queries; cached.

    The number of queries is public (D per searched end), so the whole search is priced
    up front: the sequential composition of its per-query costs, added in the order the
    queries run (the same total as charging them one by one), charged once to a filter
    capped at ρ before any noisy count is computed. A pure function of public values
    (Budget is immutable), so repeated searches with the same (ρ, D, queries) reuse it.
    """
    mech = GaussianMechanism.for_zcdp(rho / (2.0 * depth), l2_sensitivity=1.0)
    acct = Accountant(Budget.zcdp(rho))
    per_query = float(mech.privacy.rho or 0.0)
    total = 0.0
    for _ in range(n_queries):
        total += per_query
    acct.charge(Budget.zcdp(total), label=f"binsearch ({n_queries} count queries, "
                                          f"rho={mech.privacy.rho:.6g} each)")
    return acct.spent


class _SearchPlan(NamedTuple):
    """The public part of one NoisyBinSearch: target ranks, price, queries and σ."""

    k_low: int | None
    k_high: int | None
    spent: Budget
    n_queries: int
    sigma: float


def _plan_search(n: int, p: float, rho: float, bounds: tuple[float, float], depth: int,
                 alpha_low: float, alpha_high: float
                 ) -> _SearchPlan | tuple[float, float, Budget, dict[str, Any]]:
    """The public part of one search (:class:`_SearchPlan`), nothing drawn.

    Returns the final result (the public bounds, nothing spent) when neither end has a
    valid rank.
    """
    mech = GaussianMechanism.for_zcdp(rho / (2.0 * depth), l2_sensitivity=1.0)
    k_low, k_high = binsearch_targets(n, mech.sigma, depth, p, alpha_low, alpha_high)
    if k_low is None and k_high is None:  # public: nothing to search, nothing drawn
        return (float(bounds[0]), float(bounds[1]), Budget.zcdp(0.0),
                {"target_ranks": (None, None), "depth": depth, "sigma": mech.sigma,
                 "n_queries": 0})
    n_queries = depth * ((k_low is not None) + (k_high is not None))
    return _SearchPlan(k_low, k_high, _search_price(rho, depth, n_queries), n_queries,
                       mech.sigma)


def _prepare_search(n: int, p: float, rho: float, bounds: tuple[float, float], depth: int,
                    alpha_low: float, alpha_high: float, rng: np.random.Generator
                    ) -> _Search | tuple[float, float, Budget, dict[str, Any]]:
    """Target ranks (public), pricing (charged up front) and the 2D noises of one search.

    Returns the final result (the public bounds, nothing spent or drawn) when neither end
    has a valid rank.
    """
    plan = _plan_search(n, p, rho, bounds, depth, alpha_low, alpha_high)
    if not isinstance(plan, _SearchPlan):
        return plan
    noise = np.asarray(_query_noise(n, plan.sigma).sample(2 * depth, rng), dtype=np.float64)
    return _Search(plan.k_low, plan.k_high, plan.spent, plan.n_queries, plan.sigma, depth,
                   noise)


def grid_points(bounds: tuple[float, float], depth: int,
                js: NDArray[np.int64]) -> NDArray[np.float64]:
    """:func:`grid_point` for an array of interior indices 0 < j < 2^D, bit for bit.

    grid_point computes lo + (hi − lo)·(j/2^D) in double precision: j rounded to double,
    an exact division by 2^D, one rounded product, one rounded sum. When w = (hi − lo)·2^-D
    is a normal double the product j·w is the same real number as (hi − lo)·(j/2^D), so
    lo + j·w rounds identically (one multiplication fewer); otherwise the original order.
    """
    lo, hi = bounds
    jf = np.asarray(js, dtype=np.int64).astype(np.float64)
    width = hi - lo
    w = width * 2.0**-depth
    if math.isfinite(w) and abs(w) >= 2.0**-1022:  # w normal: 2^-D scaling was exact
        jf *= w
    else:  # a sub-normal or infinite step: the exact order of grid_point
        jf /= float(1 << depth)
        jf *= width
    jf += lo
    return jf


def binsearch_quantiles(
    count_at: Any,
    count_many: Any,
    n: int,
    specs: list[tuple[float, float, float]],
    rho: float,
    bounds: tuple[float, float],
    depth: int,
    rng: np.random.Generator,
) -> list[tuple[float, float, Budget, dict[str, Any]]]:
    """NoisyBinSearch for several quantiles on one grid, searched in lockstep.

    ``specs`` lists (p, α_low, α_high) per quantile; each gets ρ (the caller splits its
    budget) and is exactly :func:`binsearch_quantile` run in the order given: its target
    ranks (public), its privacy (D sensitivity-1 count queries per searched end at
    ρ/(2D)-zCDP each, priced up front) and its 2D noises, drawn from ``rng`` one quantile
    after the other as the sequential calls draw them. Only the exact counts are
    computed differently: with more than one quantile the searches (two ends per
    quantile) advance one step together, each step ONE call ``count_many(js)`` (an int64
    array of interior grid indices → the exact counts #{x ≤ g_j}); a single quantile runs
    :func:`binsearch_quantile` with the scalar ``count_at(j)`` (cheaper for two searches).
    The counts do not touch ``rng``, so the outputs are bit-identical to the sequential
    calls (tests/quantiles).
    """
    if len(specs) == 1:
        p, a_low, a_high = specs[0]
        return [binsearch_quantile(count_at, n, p, rho, bounds, depth, a_low, a_high, rng)]
    plans = [_plan_search(n, p, rho, bounds, depth, a_low, a_high)
             for p, a_low, a_high in specs]
    active = [plan for plan in plans if isinstance(plan, _SearchPlan)]
    # One sampler call for every searched quantile: the same ρ and D give the same σ, and
    # row i of the (K', 2D) block of i.i.d. exact draws is the i-th searched quantile's.
    rows = iter(np.asarray(_query_noise(n, active[0].sigma).sample(
        (len(active), 2 * depth), rng), dtype=np.float64) if active else ())
    preps: list[_Search | tuple[float, float, Budget, dict[str, Any]]] = [
        _Search(plan.k_low, plan.k_high, plan.spent, plan.n_queries, plan.sigma, depth,
                next(rows)) if isinstance(plan, _SearchPlan) else plan for plan in plans]
    searches = [(i, target, is_lower, z) for i, prep in enumerate(preps)
                if not isinstance(prep, tuple) for is_lower, target, z in prep.searches()]
    found = _lockstep(count_many, searches, bounds, depth)
    out = []
    for i, prep in enumerate(preps):
        if isinstance(prep, tuple):
            out.append(prep)
        else:
            out.append(prep.result(bounds, {e: found[(i, e)] for e in (True, False)
                                            if (i, e) in found}))
    return out


def _lockstep(count_many: Any, searches: list[tuple[int, int, bool, NDArray[np.float64]]],
              bounds: tuple[float, float], depth: int
              ) -> dict[tuple[int, bool], tuple[int, list[tuple[float, float]]]]:
    """Run the bisections of ``searches`` together: {(spec, lower): (index, queries)}.

    Each search keeps [lo, lo + 2^(D−s)] on the grid indices (the bisection halves the
    width exactly, so mid = lo + 2^(D−s−1) at step s); a lower end moves lo up to mid when
    its noisy count is ≤ its target rank, an upper end when it is < (the comparisons of
    :func:`binsearch_quantile`, in double precision against the exact integer ranks,
    which are < 2^53; ``v < k`` is written ``v ≤ prev(k)``, the largest double below k,
    which is the same test for every double v). The lower end returns lo, the upper
    lo + 1 (its hi).
    """
    if not searches:
        return {}
    m = len(searches)
    lo = np.zeros(m, dtype=np.int64)
    target = np.array([float(s[1]) for s in searches], dtype=np.float64)
    lower = np.array([s[2] for s in searches], dtype=bool)
    limit = np.where(lower, target, np.nextafter(target, -np.inf))
    z = np.ascontiguousarray(np.stack([s[3] for s in searches]).T)  # (depth, m)
    mids = np.empty((depth, m), dtype=np.int64)
    noisy = np.empty((depth, m), dtype=np.float64)
    for step in range(depth):
        mid = mids[step]
        np.add(lo, 1 << (depth - step - 1), out=mid)
        val = noisy[step]
        np.add(count_many(mid), z[step], out=val)
        np.copyto(lo, mid, where=val <= limit)
    points = grid_points(bounds, depth, mids.ravel()).reshape(depth, m)
    out = {}
    for col, (i, _, is_lower, _) in enumerate(searches):
        queries = list(zip(points[:, col].tolist(), noisy[:, col].tolist(), strict=True))
        out[(i, is_lower)] = (int(lo[col]) + (0 if is_lower else 1), queries)
    return out


# ---------------------------------------------------------------------------- CDF
def cdf_quantiles(
    leaves: NDArray[np.int64],
    specs: list[tuple[float, float, float]],
    rho: float,
    bounds: tuple[float, float],
    depth: int,
    rng: np.random.Generator,
    *,
    envelope: bool = False,
    edges: NDArray[np.float64] | None = None,
) -> tuple[list[tuple[float, float]], Budget, dict[str, Any], DPCdf]:
    """CDFPostProcess for several quantiles from ONE noisy tree.

    ``specs`` lists (p, α_low, α_high) per quantile. The tree (σ² = D/ρ per node, ρ-zCDP,
    :mod:`dpfair.median._cdf`) is released once; every quantile's tests are
    post-processing of that release, so the privacy cost does not depend on how many
    quantiles are read off it.

    Upper end of the p-quantile: if g_j < x_q then F(g_j) < q, so c(g_j) ~ Bin(n, F(g_j))
    is dominated by Bin(n, p); reject "g_j < x_q" when P(Bin(n, p) + noise ≥ C̃_j) ≤ α_high.
    Lower end: if g_j ≥ x_q then F(g_j) ≥ q and n − c(g_j) is dominated by Bin(n, 1 − p).
    As for the median, only the test at the grid point next to x_q matters, so there is no
    multiple-testing loss within one end. ``envelope=True`` (a data-chosen range) uses the
    one-threshold envelope of :mod:`dpfair.median._cdf`, valid whatever the range is.
    ``edges`` (2^D + 1 non-decreasing points from ``bounds[0]`` to ``bounds[1]``, fixed
    before the tree is released) replaces the uniform grid of ``bounds`` as the leaves'
    edges (the several-quantile layout of :mod:`dpfair.quantiles._segments`); the tests
    and their validity are the same for any such grid.
    """
    n = int(np.sum(leaves))
    a, b = bounds
    if edges is None:
        grid = leaf_edges((a, b), depth)
    else:
        grid = np.asarray(edges, dtype=np.float64)
        if grid.shape != ((1 << depth) + 1,) or grid[0] != a or grid[-1] != b or bool(
                np.any(np.diff(grid) < 0)):
            raise InvalidParameterError(
                f"edges: expected 2^{depth} + 1 non-decreasing points from {a!r} to {b!r}.")
    tree = NoisyBinaryTree.for_zcdp(depth, rho, root="public")
    acct = Accountant(Budget.zcdp(rho))
    acct.charge(tree.privacy, label="cdf/tree")
    released = tree.release(leaves, rng=rng)
    consistent = released.consistent()
    prefix = np.asarray(consistent.prefix, dtype=np.float64)
    std = np.asarray(consistent.prefix_std, dtype=np.float64)
    inner = np.arange(1, 2**depth)
    below = prefix[inner]
    above = n - below
    sig = std[inner]
    sig_plus, shift, factor = tree.noise.combination_bound(sig, tree.n_noisy_nodes)
    levels_hi = np.array([a_high for _, _, a_high in specs], dtype=np.float64) / factor
    levels_lo = np.array([a_low for _, a_low, _ in specs], dtype=np.float64) / factor
    if envelope:  # one threshold per quantile and end; every quantile tested in one pass
        s_min, s_max = float(sig_plus.min()), float(sig_plus.max())
        shift_max = float(shift.max())
        th_hi = np.array([envelope_threshold(n, p, s_min, s_max, float(lev)) + shift_max
                          for (p, _, _), lev in zip(specs, levels_hi, strict=True)])
        th_lo = np.array([envelope_threshold(n, 1.0 - p, s_min, s_max, float(lev)) + shift_max
                          for (p, _, _), lev in zip(specs, levels_lo, strict=True)])
        keep_upper = ~(below[None, :] >= th_hi[:, None])  # not rejected
        keep_lower = ~(above[None, :] >= th_lo[:, None])
    else:
        keep_upper = np.stack([~(mixture_sf(below - shift, sig_plus, n, p) <= lev)
                               for (p, _, _), lev in zip(specs, levels_hi, strict=True)])
        keep_lower = np.stack([~(mixture_sf(above - shift, sig_plus, n, 1.0 - p) <= lev)
                               for (p, _, _), lev in zip(specs, levels_lo, strict=True)])
    # j* = the largest kept inner index (0 if none), j_low = the smallest (2^D if none)
    n_inner = inner.size
    any_u, any_l = keep_upper.any(axis=1), keep_lower.any(axis=1)
    j_star = np.where(any_u, n_inner - np.argmax(keep_upper[:, ::-1], axis=1), 0)
    j_low = np.where(any_l, 1 + np.argmax(keep_lower, axis=1), 2**depth)
    out = [(float(grid[jl - 1]), float(grid[js + 1]))
           for jl, js in zip(j_low.tolist(), j_star.tolist(), strict=True)]
    indices = [(jl - 1, js + 1) for jl, js in zip(j_low.tolist(), j_star.tolist(), strict=True)]
    diagnostics: dict[str, Any] = {
        "depth": depth,
        "bins": 2**depth,
        "sigma_node": tree.sigma,
        "prefix_std_range": (float(sig.min()), float(sig.max())),
        "grid_indices": indices,
        "envelope": envelope,
        "ledger": [(e.label, e.budget.rho) for e in acct.records],
    }
    cdf = DPCdf(grid=grid, values=prefix / n, std=std / n)
    return out, acct.spent, diagnostics, cdf

r"""CDFPostProcess: a DP CDF from a noisy binary tree, then one exact test per grid point.

Construction (paper 004, §3 and Appendix D). Grid g_j = a + j·|R|/2^D, j = 0..2^D, with
D the smallest depth giving bins of width ≤ θ. Leaf j counts the records in
(g_j, g_{j+1}] (leaf 0 also holds the points at a), so the prefix P_j = Σ_{i<j} leaf_i equals
c(g_j) = #{x ≤ g_j} for j ≥ 1. Levels 1..D of the dyadic tree get N(0, σ²) noise per node;
the root n is public. Replacing one record moves two nodes per level by ±1, so the L2
sensitivity of the released vector is sqrt(2D) and σ² = D/ρ gives exactly ρ-zCDP
(2D/(2σ²) = ρ). Honaker's least-squares post-processing makes the tree consistent; each
estimated prefix C̃_j is then c(g_j) plus a known linear combination of the node noises,
with nominal sd σ_j (:mod:`dpfair.mechanisms.tree`). The node noise is the exact discrete
Gaussian (no floating-point leak), so C̃_j − c(g_j) is not exactly N(0, σ_j²); the tests
below use the proven bound P(C̃_j − c ≥ u) ≤ f·Φ̄((u − w_j)/σ⁺_j)
(:meth:`~dpfair.mechanisms.discrete_gaussian.LatticeNoise.combination_bound`), i.e. σ_j,
c and α/2 replaced by σ⁺_j, c − w_j and α/(2f).

Upper end. If g_j < med(P) then c(g_j) ~ Bin(n, F(g_j)) with F(g_j) ≤ 1/2, stochastically
dominated by B ~ Bin(n, 1/2); so C̃_j is dominated by B + N(0, σ_j²). Reject "g_j < med"
when S_j(C̃_j) ≤ α/2, S_j(c) = P(B + N(0, σ_j²) > c) — this is the test C̃_j > a_j with a_j
the (1 − α/2) quantile of the mixture, evaluated as a survival function so that no
threshold needs to be searched for. Under g_j < med the rejection probability is ≤ α/2.
U = g_{j*+1} where j* is the largest index in 1..2^D − 1 that is *not* rejected (0 if
none). Validity needs one test only: for x* = the largest grid point below med, the test
at x* is not rejected with probability ≥ 1 − α/2, and then U ≥ the next grid point ≥ med.
No multiple-testing correction is needed.

Lower end mirrors it with T_j = n − C̃_j (records above g_j), which for g_j > med is
dominated by B + N(0, σ_j²): L = g_{j_*−1} for the smallest non-rejected j_*.

The mixture survival function is computed exactly: Σ_k P(B = k)·Φ̄((c − k)/σ) over the
binomial's support, restricted to n/2 ± 5·sqrt(n) where the binomial has all but
< 4e-22 of its mass (Hoeffding); that discarded mass is *added*, so the test can only
become more conservative.

Data-dependent range (used by BinSearch+CDF). If the range R₂ was itself chosen from
the data, the grid point x* below the median depends on R₂, hence on the sample, and the
per-point level argument breaks. With ``envelope=True`` all tests use one threshold a and
the worst case over the possible noise levels: q(b) = Φ̄((a − b)/σ_max) for b ≤ a and
Φ̄((a − b)/σ_min) for b > a dominates the rejection probability at every grid point of every
possible range, and a solves E_B[q(B)] = α/2, so the bound holds whatever R₂ is.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair._lazy import LazyModule
from dpfair.mechanisms import NoisyBinaryTree, leaf_edges
from dpfair.median._result import DPCdf
from dpfair.privacy import Accountant, Budget

special: Any = LazyModule("scipy.special")  # imported on first use (CLI start-up)

__all__ = ["CdfTreeRelease", "cdf_interval", "mixture_sf", "release_cdf_tree"]

_BLOCK = 64


@functools.lru_cache(maxsize=64)
def _binomial_support(
    n: int, p: float = 0.5
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Support window n·p ± 5·sqrt(n) (+2) of Bin(n, p), its pmf, and a bound on the rest.

    Hoeffding (any p): P(|B − np| ≥ t) ≤ 2·exp(−2t²/n) = 2e^{−50} < 4e-22 for t = 5·sqrt(n).
    """
    half = 5.0 * math.sqrt(n) + 2.0
    centre = n / 2.0 if p == 0.5 else n * p
    k_lo = max(0, math.floor(centre - half))
    k_hi = min(n, math.ceil(centre + half))
    k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
    pmf = _window_pmf(k, n, p)
    dropped = 0.0 if (k_lo == 0 and k_hi == n) else 2.0 * math.exp(-50.0)
    k.setflags(write=False)
    pmf.setflags(write=False)
    return k, pmf, dropped


def _window_pmf(k: NDArray[np.float64], n: int, p: float) -> NDArray[np.float64]:
    """P(B = k) over a contiguous window of k, B ~ Bin(n, p), each value an upper bound.

    Without scipy.stats (its import dominated a first call). From the window's largest
    term (its mode) outwards, the ratios P(k + 1)/P(k) = (n − k)/(k + 1) · p/(1 − p)
    multiplied up give the shape (no underflow: the window spans ±5√n + 2 around n·p, so
    its smallest term is above e^{-60} of its largest), and the window is scaled to sum
    to 1 (an exactly rounded sum). The true window pmf is that exact shape times 1 − δ ≤ 1,
    δ < 4e-22 the mass outside the window (:func:`_binomial_support`). Each computed
    term is the exact shape up to a relative error ≤ 3m·2^-53 (m multiplications from the
    mode, each ratio and product rounded once or twice), so inflating every term by
    (1 + 4(m + 2)·2^-53) makes each an upper bound on P(B = k): the survival sums built
    from them can only be larger than the exact ones, and the tests that compare them with
    their levels only more conservative.
    """
    ks = np.asarray(k, dtype=np.float64)
    if ks.size == 1:
        return np.ones(1)
    odds = p / (1.0 - p)
    # P(k+1)/P(k), k = ks[0]..ks[-2]: (n − k)/(k + 1)·odds, in place (fewer temporaries,
    # the same operations in the same order)
    ratio = np.subtract(n, ks[:-1])
    np.divide(ratio, ks[:-1] + 1.0, out=ratio)
    np.multiply(ratio, odds, out=ratio)
    # mode of the window: the last k whose ratio from the previous term is ≥ 1
    up = np.flatnonzero(ratio >= 1.0)
    top = int(up[-1]) + 1 if up.size else 0
    shape = np.empty(ks.size, dtype=np.float64)
    shape[top] = 1.0
    if top + 1 < ks.size:
        np.cumprod(ratio[top:], out=shape[top + 1 :])
    if top > 0:
        inv = np.divide(1.0, ratio[:top][::-1])
        np.cumprod(inv, out=inv)
        shape[:top] = inv[::-1]
    m = max(top, ks.size - 1 - top)
    total = _exact_sum(shape)
    inflation = 1.0 + 4.0 * (m + 2) * 2.0**-53
    np.divide(shape, total, out=shape)
    return np.multiply(shape, inflation, out=shape)


_HALF_BITS = 27  # a 53-bit integer significand = hi·2^27 + lo, hi < 2^26, lo < 2^27
#: Exponent bins more than this far below the top one are bounded, not summed, when the
#: bound cannot change the rounding (:func:`_exact_sum`).
_SMALL_BINS = 90


def _exact_sum(values: NDArray[np.float64]) -> float:
    """The exactly rounded sum of finite binary64 values: ``math.fsum``'s value, vectorised.

    Each value is v = M·2^(e − 53) with M = frexp-mantissa·2^53 an integer, |M| < 2^53
    (exact: scaling by a power of two). M splits exactly into hi·2^27 + lo (|hi| < 2^26,
    |lo| < 2^27). Per exponent e, the sums of the hi and of the lo parts are sums of
    integers below 2^27 in magnitude; with fewer than 2^25 values every partial sum stays
    below 2^52, so ``np.bincount``'s float64 accumulation is exact in any order. The exact
    total Σ_e (H_e·2^27 + L_e)·2^(e − 53) is then formed as one Python integer over the
    smallest exponent and rounded once (int → float and int/int true division are
    correctly rounded, ties to even), which is exactly what ``math.fsum`` returns (also
    correctly rounded, ties to even). So the value is bit-identical to ``math.fsum`` (the
    former code; tested on adversarial inputs), at the cost of a few numpy passes instead of
    a Python list and a partials loop over every element.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return 0.0
    if v.size >= 1 << 25 or not bool(np.isfinite(v).all()):
        return math.fsum(v.tolist())  # outside the exactness argument: the reference itself
    mant, expo = np.frexp(v)
    m = np.multiply(mant, 2.0**53, out=mant)  # exact integers, |m| < 2^53
    hi = np.multiply(m, 2.0**-_HALF_BITS)  # = m / 2^27 exactly (a power of two)
    np.trunc(hi, out=hi)
    lo = np.subtract(m, hi * 2.0**_HALF_BITS, out=m)  # exact, |lo| < 2^27
    e_min = int(expo.min())
    bins = np.subtract(expo, e_min, dtype=np.intp)
    h = np.bincount(bins, weights=hi)
    low = np.bincount(bins, weights=lo)
    shift = e_min - 53  # the total is Σ_j (h_j·2^27 + low_j)·2^j·2^shift
    nonzero = np.flatnonzero((h != 0.0) | (low != 0.0))
    cut = int(nonzero[-1]) - _SMALL_BINS if nonzero.size else 0
    if cut > 0 and shift < 0:
        # The bins below `cut` hold values below 2^-(_SMALL_BINS - 15) of the largest: sum
        # the others exactly and bound these (B ≥ their |sum|, in units of 2^shift). If
        # both ends of [T − B, T + B] round to the same non-zero float, so does every
        # point between (rounding is monotone), in particular the exact total.
        big = 0
        for j in nonzero[nonzero >= cut].tolist():
            big += ((int(h[j]) << _HALF_BITS) + int(low[j])) << j
        small = float(np.sum(np.abs(h[:cut]))) * 2.0**_HALF_BITS + float(
            np.sum(np.abs(low[:cut])))
        bound = (math.ceil(small * (1.0 + 1e-9)) + 1) << cut  # float sums: ≤ 1e-12 off
        den = 1 << -shift
        try:
            below, above = (big - bound) / den, (big + bound) / den
        except OverflowError:  # an end of the bound rounds past DBL_MAX: sum exactly
            below, above = 0.0, 1.0
        if below == above and below != 0.0:
            return below
    total = 0
    for j in nonzero.tolist():
        total += ((int(h[j]) << _HALF_BITS) + int(low[j])) << j
    if total == 0:
        return math.fsum(v.tolist())  # an exact zero: fsum's sign of zero
    if shift >= 0:
        return float(total << shift)
    return total / (1 << -shift)


#: Φ(−40) is 0.0 and Φ(9) is 1.0 in binary64 (Φ(9) = 1 − 1.1e-19 rounds to 1).
_LOWER_REACH, _UPPER_REACH = 40.0, 9.0


@functools.lru_cache(maxsize=64)
def _binomial_suffix(n: int, p: float = 0.5) -> NDArray[np.float64]:
    """tail[i] = Σ_{j ≥ i} pmf[j] over the support window (tail[-1] = 0)."""
    _, pmf, _ = _binomial_support(n, p)
    tail = np.empty(pmf.size + 1)
    tail[-1] = 0.0
    np.cumsum(pmf[::-1], out=tail[-2::-1])  # = cumsum(pmf[::-1])[::-1], no temporary
    tail.setflags(write=False)
    return tail


def mixture_sf(
    c: NDArray[np.float64],
    sigma: NDArray[np.float64] | float,
    n: int,
    *,
    sigma_above: NDArray[np.float64] | float | None = None,
    p: float = 0.5,
) -> NDArray[np.float64]:
    """P(B + N(0, σ²) > c) for B ~ Bin(n, p) (default p = 1/2), vectorised over c (and σ).

    With ``sigma_above`` the noise level used for binomial values k > c is
    ``sigma_above`` instead of ``sigma`` (the envelope of :mod:`dpfair.median._cdf`).
    The binomial mass left out of the support window is added (an upper bound). Points
    c more than 40 noise standard deviations outside the window are answered in closed
    form (the Gaussian tail there is below 1e-300).
    """
    c_arr = np.atleast_1d(np.asarray(c, dtype=np.float64))
    if c_arr.shape == (1,) and np.ndim(sigma) == 0 and (
            sigma_above is None or np.ndim(sigma_above) == 0):
        return _mixture_sf_one(float(c_arr[0]), float(sigma),
                               None if sigma_above is None else float(sigma_above), n, p)
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), c_arr.shape)
    sig_up = sig if sigma_above is None else np.broadcast_to(
        np.asarray(sigma_above, dtype=np.float64), c_arr.shape)
    k, pmf, dropped = _binomial_support(n, p)
    out = np.empty_like(c_arr)
    reach = 40.0 * np.maximum(sig, sig_up)
    far_below = c_arr < k[0] - reach
    far_above = c_arr > k[-1] + reach
    out[far_below] = 1.0
    out[far_above] = 0.0
    todo = np.flatnonzero(~(far_below | far_above))
    if todo.size == 0:
        return np.minimum(out + dropped, 1.0)
    # Only k within [c − 40σ, c + 9σ⁺] need Φ: below it Φ((k − c)/σ) ≤ Φ(−40), which is 0.0
    # in binary64, and above it Φ((k − c)/σ⁺) ≥ Φ(9) rounds to 1.0, so those terms are the
    # pmf itself (a suffix sum). Same terms as the full sum over the window, O(50σ) each.
    tail = _binomial_suffix(n, p)
    cv, sv, uv = c_arr[todo], sig[todo], sig_up[todo]
    first = np.searchsorted(k, cv - _LOWER_REACH * sv, side="left")
    stop = np.searchsorted(k, cv + _UPPER_REACH * uv, side="right")
    for start in range(0, todo.size, _BLOCK):
        b = slice(start, start + _BLOCK)
        width = int((stop[b] - first[b]).max()) if stop[b].size else 0
        idx = first[b, None] + np.arange(max(width, 1))[None, :]
        inside = idx < stop[b, None]
        np.minimum(idx, k.size - 1, out=idx)
        diff = k[idx] - cv[b, None]  # k − c
        scale = np.where(diff > 0, uv[b, None], sv[b, None])
        terms = np.where(inside, special.ndtr(diff / scale) * pmf[idx], 0.0)
        # An explicit (pairwise) sum, not a BLAS product: the same value however many
        # BLAS threads there are, and no thread start-up per call.
        out[todo[b]] = np.sum(terms, axis=1) + tail[stop[b]]
    return np.minimum(out + dropped, 1.0)


def _mixture_sf_one(c: float, sigma: float, sigma_above: float | None, n: int, p: float
                    ) -> NDArray[np.float64]:
    """:func:`mixture_sf` at one point with scalar noise levels (the threshold checks).

    The same terms in the same order as the general path's block of one row (the same
    searchsorted window, the same element-wise operations, one contiguous pairwise sum),
    without its broadcasting and blocking overhead: bit-identical (tested).
    """
    up = sigma if sigma_above is None else sigma_above
    k, pmf, dropped = _binomial_support(n, p)
    reach = 40.0 * float(np.maximum(sigma, up))  # NaN-propagating, as the general path
    if c < k[0] - reach:
        return np.array([min(1.0 + dropped, 1.0)])
    if c > k[-1] + reach:
        return np.array([min(0.0 + dropped, 1.0)])
    tail = _binomial_suffix(n, p)
    first = int(np.searchsorted(k, c - _LOWER_REACH * sigma, side="left"))
    stop = int(np.searchsorted(k, c + _UPPER_REACH * up, side="right"))
    if stop <= first:  # the general path's one-term block: k[first] (clamped), masked out
        total = 0.0
    else:
        diff = k[first:stop] - c
        scale = np.where(diff > 0, up, sigma)
        total = float(np.sum(special.ndtr(diff / scale) * pmf[first:stop]))
    return np.array([min(total + float(tail[stop]) + dropped, 1.0)])


def _bracket_root(f: Any, lo: float, hi: float) -> float:
    """A root of the decreasing ``f`` on [lo, hi] (f(lo) > 0 ≥ f(hi)) to 1e-10 + 1e-14|x|.

    Regula falsi with the Illinois step (superlinear, bracket kept) instead of
    scipy.optimize.brentq, whose import dominated a first call. Returns the upper end of
    the final bracket, where f ≤ 0. The caller re-checks its threshold against f anyway.
    """
    f_lo, f_hi = f(lo), f(hi)
    if f_hi > 0.0:
        return hi
    if f_lo <= 0.0:
        return lo
    side = 0
    for _ in range(500):
        if hi - lo <= 1e-10 + 1e-14 * max(abs(lo), abs(hi)):
            break
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
        fx = f(x)
        if fx > 0.0:
            lo, f_lo = x, fx
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = x, fx
            if side == 1:
                f_lo *= 0.5
            side = 1
    return hi


def _envelope_newton(n: int, sigma_min: float, sigma_max: float, level: float, p: float,
                     start: float) -> float | None:
    """The root of E_B[q_env(B, a)] = level by safeguarded Newton steps from ``start``.

    G(a) = Σ_k P(B = k)·Φ̄((a − k)/σ(k)) + dropped − level (σ = σ_max for k ≤ a, σ_min
    above: :func:`mixture_sf`'s terms over the same binomial window, the k beyond
    a + 9σ_min counted by the suffix sum) and G'(a) = −Σ_k P(B = k)·φ((a − k)/σ(k))/σ(k)
    come from ONE pass over the O(50σ) binomial values in reach of a, a few numpy calls
    instead of :func:`mixture_sf`'s general path; from :func:`_envelope_start`, two to
    four steps reach the root to the last bits (G is smooth between the kinks k = a,
    where the derivative jumps by one pmf term's share, so the steps converge
    quadratically near the root). A step that would leave the bracket [lo, hi] known so
    far (G(lo) > 0 ≥ G(hi)) bisects instead. It stops when a step is below
    1e-12 + one ulp of a, or when the quadratic rate read off the last two steps puts the
    next one below a thousandth of that. Returns the root, or ``None`` (no derivative, no
    convergence in 60 steps) for the caller's bracketing search. Only a search: the
    caller checks its threshold with :func:`mixture_sf` itself (an early stop can only
    make that check step the threshold up).
    """
    k, pmf, dropped = _binomial_support(n, p)
    tail = _binomial_suffix(n, p)
    k0, size = float(k[0]), k.size  # k = k0, k0 + 1, ... (exact integers)
    reach_lo, reach_up = _LOWER_REACH * sigma_max, _UPPER_REACH * sigma_min
    ndtr = special.ndtr
    lo, hi = -math.inf, math.inf
    x, prev = float(start), math.inf
    for _ in range(60):
        if not math.isfinite(x):
            return None
        i0 = min(max(0, math.ceil(x - reach_lo - k0)), size)
        i1 = min(max(0, math.floor(x + reach_up - k0) + 1), size)
        d = k[i0:i1] - x
        s = np.where(d > 0.0, sigma_min, sigma_max)
        t = d / s
        w = pmf[i0:i1]
        g = float(np.sum(ndtr(t) * w)) + float(tail[i1]) + dropped - level
        if g == 0.0:
            # on a flat stretch of G (a plateau P(B ≥ k) or the dropped mass) G = level
            # does not locate the root's lower edge: leave it to the bracketing search
            return None
        slope = float(np.sum(np.exp(-0.5 * t * t) * w / s)) * _INV_SQRT_2PI
        if g > 0.0:
            lo = x
        else:
            hi = x
        if not slope > 0.0 or not math.isfinite(g):
            return None
        nxt = x + g / slope  # G' = −slope
        step = abs(nxt - x)
        tol = 1e-12 + 2.3e-16 * abs(x)  # ≈ one ulp of x
        if step <= tol:
            return nxt
        if not lo < nxt < hi:
            if not (math.isfinite(lo) and math.isfinite(hi)):
                return None
            nxt, step = 0.5 * (lo + hi), math.inf  # a bisection: no rate to read
        elif step < prev < math.inf:
            # quadratic convergence e_{k+1} ≈ r·e_k², r read off the last two steps:
            # when the next correction would be far below the tolerance, stop here
            if step**3 <= 1e-3 * tol * prev**2:
                return nxt
        x, prev = nxt, step
    return None


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _envelope_start(n: int, sigma_min: float, sigma_max: float, level: float,
                    p: float) -> float:
    """A starting point for :func:`_envelope_newton`: the envelope root, approximately.

    The (1 − level) quantile of B + N(0, σ_max²) by its Cornish–Fisher expansion (the
    binomial's skewness and kurtosis; level ≥ 1/2 uses the plain normal quantile), plus
    (σ_max − σ_min)/√(2π): the envelope uses σ_min for the binomial values above a,
    which adds f(a)·(σ_max − σ_min)·φ(0) to the tail (f the smooth density there), so the
    root moves up by that much. Within a few hundredths of the root at n ≥ 10^4 (two or
    three Newton steps instead of four or five). Only a start: nothing depends on it but
    the number of steps.
    """
    var_b = n * p * (1.0 - p)
    sd = math.sqrt(var_b + sigma_max**2)
    z = -float(special.ndtri(min(max(level, 1e-300), 0.5)))
    w = z
    if level < 0.5 and var_b > 0.0:
        g1 = var_b * (1.0 - 2.0 * p) / sd**3
        g2 = var_b * (1.0 - 6.0 * p * (1.0 - p)) / sd**4
        w = (z + (z * z - 1.0) * g1 / 6.0 + (z**3 - 3.0 * z) * g2 / 24.0
             - (2.0 * z**3 - 5.0 * z) * g1 * g1 / 36.0)
    return n * p + sd * w + (sigma_max - sigma_min) * _INV_SQRT_2PI


@functools.lru_cache(maxsize=256)
def _envelope_threshold(
    n: int, sigma_min: float, sigma_max: float, level: float, p: float = 0.5
) -> float:
    """The a with E_B[q_env(B, a)] = level, B ~ Bin(n, p) (continuous, decreasing in a).

    Returned slightly above the root (by 1e-9, more if needed): the returned a is checked
    to satisfy E_B[q_env(B, a)] ≤ level, so rejecting at ≥ a keeps the level (the root
    finder's answer is only within 1e-10 + 1e-14·|a| of the true root). A function of public inputs
    only, cached. ``inf`` (never reject) when the level is below the window's dropped
    mass, which every evaluated E_B[q_env] includes.

    The root comes from Newton steps (:func:`_envelope_newton`, one vectorised pass per
    step, from the normal approximation), or, if those do not converge, from the
    bracketing search (:func:`_bracket_root`) used before. Either way the check below,
    by :func:`mixture_sf` itself, is what makes the threshold valid.
    """

    def gap(a: float) -> float:
        sf = mixture_sf(np.array([a]), sigma_max, n, sigma_above=sigma_min, p=p)
        return float(sf[0]) - level

    if _binomial_support(n, p)[2] > level:
        # mixture_sf adds the mass outside the binomial window (< 4e-22) at every a, so
        # no threshold meets a level below it: never reject (an end at its range's edge,
        # which is valid). The search below would step up forever.
        return math.inf
    lo, hi = -10.0 * sigma_max, n + 10.0 * sigma_max + 10.0
    # the normal approximation: the Newton start, and a narrow starting bracket for
    # the fallback (kept only if it brackets the root; otherwise the wide one)
    sd = math.sqrt(n * p * (1.0 - p) + sigma_max**2)
    guess = n * p + sd * -float(special.ndtri(min(max(level, 1e-300), 0.5)))
    root = _envelope_newton(n, sigma_min, sigma_max, level, p,
                            min(max(_envelope_start(n, sigma_min, sigma_max, level, p), lo), hi))
    if root is None or not lo <= root <= hi:
        near_lo, near_hi = max(lo, guess - 2.0 * sd - 2.0), min(hi, guess + 2.0 * sd + 2.0)
        if near_lo < near_hi and gap(near_lo) > 0.0 >= gap(near_hi):
            lo, hi = near_lo, near_hi
        root = _bracket_root(gap, lo, hi)
    thresh = float(root) + 1e-9
    if thresh - float(root) < 1e-9:  # beyond 2^23 the margin is below an ulp: round up
        thresh = math.nextafter(thresh, math.inf)
    step = 1e-9 + 4e-14 * abs(thresh)
    while gap(thresh) > 0.0:  # the root's tolerance exceeded the margin: move up
        thresh += step
        step *= 2.0
    return thresh


def _check_q(q: float) -> float:
    qf = float(q)
    if not 0.0 < qf < 1.0:
        raise InvalidParameterError(f"q={q!r}: the quantile level must lie in (0, 1).")
    return qf


@dataclass(frozen=True, eq=False)
class CdfTreeRelease:
    r"""One noisy-tree release of the CDF that answers any number of quantile queries.

    Built by :func:`release_cdf_tree`, which spends the whole budget once (the tree,
    ρ-zCDP). Every :meth:`interval` call afterwards is post-processing of the released
    (Honaker-consistent) prefix counts: it costs no privacy and no pass over the data —
    O(2^D) arithmetic plus an exact mixture sum only at the few grid points whose count is
    within reach of the binomial window — so k quantiles cost one tree.

    Attributes
    ----------
    n : int
        Public number of records (the root).
    depth : int
        D; the grid has 2^D bins.
    bounds : (float, float)
        The public range of the grid.
    grid : ndarray, shape (2^D + 1,)
        Grid points g_j.
    prefix, std : ndarray, shape (2^D + 1,)
        Consistent prefix estimates C̃_j of #{x ≤ g_j} and their nominal sds σ_j.
    spent : Budget
        The privacy of the release (ρ-zCDP): charge it once for all the queries.
    sigma_node : float
        Node noise sd.
    ledger : list of (str, float)
        The accountant's entries of the release.

    Notes
    -----
    Simultaneous coverage over several queries is the caller's business (e.g. levels
    α_i with Σ α_i ≤ α, by the union bound): each query's own guarantee is in
    :meth:`interval`.
    """

    n: int
    depth: int
    bounds: tuple[float, float]
    grid: NDArray[np.float64]
    prefix: NDArray[np.float64]
    std: NDArray[np.float64]
    spent: Budget
    sigma_node: float
    ledger: list[tuple[str, float | None]]
    sig_plus: NDArray[np.float64]
    shift: NDArray[np.float64]
    factor: float

    @property
    def cdf(self) -> DPCdf:
        """The DP CDF at the grid points (values C̃_j/n, sds σ_j/n)."""
        return DPCdf(grid=self.grid, values=self.prefix / self.n, std=self.std / self.n)

    def interval(
        self, q: float = 0.5, alpha: float = 0.05, *, envelope: bool = False
    ) -> tuple[float, float, dict[str, Any]]:
        r"""(low, high, diagnostics) of a (1 − α) interval for the q-quantile Q_q.

        Q_q = inf{t : F(t) ≥ q}. Upper end: if g_j < Q_q then F(g_j) < q, so
        c(g_j) ~ Bin(n, F(g_j)) is dominated by B ~ Bin(n, q); g_j is rejected as "below
        Q_q" when P(B + noise ≥ C̃_j) ≤ α/2 (the proven discrete-noise bound of
        :meth:`~dpfair.mechanisms.discrete_gaussian.LatticeNoise.combination_bound`), and
        U is the grid point after the largest non-rejected j. Lower end: if g_j > Q_q then
        F(g_j) ≥ q and the records above g_j are dominated by Bin(n, 1 − q); the mirror test
        on n − C̃_j gives L. Each end fails w.p. ≤ α/2 by the one-test argument of the
        module docstring (q = 1/2 is the median's CDFPostProcess, bit for bit). With
        ``envelope=True`` the thresholds are the worst case over the noise levels (for a
        data-dependent range, as in BinSearch+CDF).

        Parameters
        ----------
        q : float in (0, 1), default 0.5
        alpha : float in (0, 1), default 0.05
        envelope : bool, default False
        """
        qf = _check_q(q)
        inner = np.arange(1, 2**self.depth)
        below = self.prefix[inner]  # C̃_j: records ≤ g_j
        above = self.n - below  # records > g_j
        level = alpha / 2.0 / self.factor
        p_up, p_low = qf, 1.0 - qf
        if envelope:
            s_min, s_max = float(self.sig_plus.min()), float(self.sig_plus.max())
            top = float(self.shift.max())
            thresh_up = _envelope_threshold(self.n, s_min, s_max, level, p_up) + top
            thresh_low = thresh_up if p_low == p_up else (
                _envelope_threshold(self.n, s_min, s_max, level, p_low) + top)
            reject_upper = below >= thresh_up
            reject_lower = above >= thresh_low
        else:
            reject_upper = mixture_sf(below - self.shift, self.sig_plus, self.n, p=p_up) <= level
            reject_lower = mixture_sf(above - self.shift, self.sig_plus, self.n,
                                      p=p_low) <= level
        keep_u = inner[~reject_upper]
        j_star = int(keep_u.max()) if keep_u.size else 0
        keep_l = inner[~reject_lower]
        j_low = int(keep_l.min()) if keep_l.size else 2**self.depth
        low, high = float(self.grid[j_low - 1]), float(self.grid[j_star + 1])
        sig = self.std[inner]
        diagnostics: dict[str, Any] = {
            "depth": self.depth,
            "bins": 2**self.depth,
            "sigma_node": self.sigma_node,
            "prefix_std_range": (float(sig.min()), float(sig.max())),
            "upper_index": j_star + 1,
            "lower_index": j_low - 1,
            "envelope": envelope,
            "ledger": list(self.ledger),
        }
        if qf != 0.5:
            diagnostics["q"] = qf
        return low, high, diagnostics


def release_cdf_tree(
    leaves: NDArray[np.int64],
    rho: float,
    bounds: tuple[float, float],
    depth: int,
    rng: np.random.Generator,
) -> CdfTreeRelease:
    """Release the noisy tree over 2^depth leaf counts once (ρ-zCDP); query it many times.

    Parameters
    ----------
    leaves : ndarray of int64, shape (2^depth,)
        Exact leaf counts in the :func:`dpfair.mechanisms.leaf_counts` layout (from sorted
        data: :func:`dpfair.mechanisms.tree.leaf_counts_sorted`, O(2^D log n)).
    rho : float
        zCDP budget of the whole tree (levels 1..D, σ² = D/ρ; the root n is public).
    bounds : (float, float)
        Public range of the grid.
    depth : int
        D ≥ 1.
    rng : numpy.random.Generator
        Source of the node noise (2^{D+1} − 2 exact discrete Gaussian draws, in one call).

    Returns
    -------
    CdfTreeRelease
        ``.interval(q, alpha)`` answers a quantile query; ``.spent`` is the privacy of the
        release (charged once, whatever the number of queries); ``.cdf`` the DP CDF.

    Notes
    -----
    :func:`cdf_interval` is ``release_cdf_tree`` followed by one ``interval(0.5, α)``:
    same random draws, same output. For several quantiles from one release (the quantile
    API's tree methods), call ``interval`` once per q with levels whose sum is the
    simultaneous α.
    """
    n = int(np.sum(leaves))
    grid = leaf_edges(bounds, depth)
    tree = NoisyBinaryTree.for_zcdp(depth, rho, root="public")
    acct = Accountant(Budget.zcdp(rho))
    acct.charge(tree.privacy, label="cdf/tree")
    released = tree.release(leaves, rng=rng)
    consistent = released.consistent()
    prefix = np.asarray(consistent.prefix, dtype=np.float64)
    std = np.asarray(consistent.prefix_std, dtype=np.float64)
    # The node noise is the exact discrete Gaussian (mechanisms.discrete_gaussian), so C̃_j
    # is c(g_j) plus a linear combination T of discrete Gaussians rather than N(0, σ_j²):
    # P(T ≥ u) ≤ f·Φ̄((u − w_j)/σ⁺_j) (LatticeNoise.combination_bound; w_j ≤ 0.4 % of σ_j,
    # σ⁺_j/σ_j − 1 ≤ 2.5e-4, f − 1 ≤ 1e-12). The tests use this bound, so their level stays
    # ≤ α/2 for the executed noise; T is symmetric, so the same bound serves both ends.
    sig = std[1 : 2**depth]
    sig_plus, shift, factor = tree.noise.combination_bound(sig, tree.n_noisy_nodes)
    return CdfTreeRelease(
        n=n, depth=depth, bounds=(float(bounds[0]), float(bounds[1])), grid=grid,
        prefix=prefix, std=std, spent=acct.spent, sigma_node=tree.sigma,
        ledger=[(e.label, e.budget.rho) for e in acct.records],
        sig_plus=np.asarray(sig_plus, dtype=np.float64),
        shift=np.asarray(shift, dtype=np.float64), factor=float(factor),
    )


def cdf_interval(
    leaves: NDArray[np.int64],
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    depth: int,
    rng: np.random.Generator,
    *,
    envelope: bool = False,
    q: float = 0.5,
) -> tuple[float, float, Budget, dict[str, Any], DPCdf]:
    """Run CDFPostProcess on 2^depth leaf counts (``mechanisms.leaf_counts`` layout).

    Returns (low, high, spent, diagnostics, cdf). ``q`` (default 1/2, the median) selects
    the quantile (:meth:`CdfTreeRelease.interval`); several quantiles from one release:
    :func:`release_cdf_tree`.
    """
    release = release_cdf_tree(leaves, rho, bounds, depth, rng)
    low, high, diagnostics = release.interval(q, alpha, envelope=envelope)
    return low, high, release.spent, diagnostics, release.cdf

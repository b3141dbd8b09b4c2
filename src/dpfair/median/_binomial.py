r"""The binomial law Bin(n, p) in NumPy alone: log-pmf, CDF and survival function.

The exact binomial tail is what every rank target of paper 004 is computed from
(:mod:`dpfair.median._ranks`, :mod:`dpfair.quantiles`). It used to come from
``scipy.special.bdtr`` / ``scipy.stats.binom``; importing SciPy's special functions costs
about 0.2 s, several times a whole ``dpfair median-ci`` release, so the law is computed here.

Method
------
**pmf.** Loader's saddle-point form (C. Loader, *Fast and accurate computation of binomial
probabilities*, 2000), for 0 < x < n,

.. math:: \log P(B = x) = \delta(n) - \delta(x) - \delta(n - x)
          - D(x, np) - D(n - x, nq) - \tfrac12 \log\bigl(2\pi x (1 - x/n)\bigr),

an identity, with :math:`\delta(m) = \log m! - \log(\sqrt{2\pi m}\,(m/e)^m)` (Stirling's
error: a correctly rounded table for m ≤ 15, its asymptotic series above, truncated where
the next term is below 2^-53 of the value) and the deviance
:math:`D(x, M) = x\log(x/M) + M - x \ge 0` (its series
:math:`(x-M)v + 2x\sum_{j\ge1} v^{2j+1}/(2j+1)`, :math:`v = (x-M)/(x+M)`, for
:math:`|v| < 1/2`, summed until the next term is below 2^-60 of the sum; the closed form,
whose cancellation loses at most a factor 2 there, otherwise); log(1 − x/n) is taken from
the exact integer n − x. No quantity of size log n! is formed and subtracted — the
``gammaln`` form loses |log n!|·2^-53 ≈ 3e-9 at n = 2·10^7 — so the exponent's absolute
error is a few units of 2^-53 times (1 + |log P(B = x)|), plus |x − np|·2^-53 from
rounding n·p (the problem's own conditioning at a binary64 p; nil at p = 1/2). Measured
against exact rational arithmetic and a 50-digit reference (tests/median/test_binomial.py):
relative error ≤ 45·2^-53·(1 + |ln P|) for n ≤ 400 and ≤ 6.2e-14·(1 + |ln P|) up to
n = 2·10^7, i.e. ≲ 3e-13 at the α/2 levels that rank targets compare with. ``x = 0`` and
``x = n`` use :math:`n\log q` (as ``log1p``) and :math:`n\log p`.

**CDF and survival function.** The pmf is log-concave, so {x : P(B = x) ≥ e^{-800}} is an
interval [L, U] around the mode; it is found by a vectorised search and the pmf is
evaluated on it once per (n, p) (≈ 80 standard deviations wide, O(√(npq)) time and memory,
cached). Outside it every term is < e^{-800}, so the whole of the mass outside is
< n·e^{-800} < 2^-1075 for n < 2^53: it rounds to zero in binary64, and dropping it changes
no value returned (an absolute change below half the smallest subnormal). P(B ≤ k) and
P(B > k) are then sums of positive terms, computed in blocks (a running sum within blocks of
b ≈ √m terms, and a running sum of the block totals), so each is within
(b + m/b + 2)·2^-53 ≤ (2√m + 3)·2^-53 of its value relatively (the standard bound for
recursive summation of non-negative terms), i.e. < 3e-13 for m ≤ 10^6. Each of the CDF
and the survival function is read from its own tail's sum while that sum is ≤ 1/2 and as
1 − (the other tail) above, so both are accurate relatively where they are small.

Why the rank targets are the same
---------------------------------
A rank target is the largest k with F(k) ≤ (α/2)(1 − 10^-9) (``_ROUNDING_MARGIN`` in
:mod:`dpfair.median._ranks`; the quantiles' classical ranks use 10^-12), F an increasing
sum of binomial tail terms. Let F̂ be F as computed here and η a bound on |F̂/F − 1|:
η < 5e-11 for n ≤ 2·10^7 and α/2 ≥ 1e-300, and η < 5e-13 at the usual α/2 ≥ 1e-3,
from the two bounds above (so below the quantiles' 10^-12 too). Then

* **validity**: F̂(k) ≤ (α/2)(1 − 10^-9) implies F(k) ≤ (α/2)(1 − 10^-9)/(1 − η) < α/2,
  so every target computed here meets its coverage requirement exactly. The margin
  argument now holds; with SciPy's ``bdtr`` it did not for large n: ``bdtr``'s relative
  error is 1.6e-8 at n = 2·10^7 around the 0.05 level (10 times the margin) and 6e-4 next
  to the median (checked against the 50-digit reference);
* **identity**: the target differs from the ``bdtr``-based one only if F(k*) or F(k* + 1)
  lies within relative η + η_bdtr of the limit, while consecutive F values differ by a
  relative ~1/√n or more. The tests find the targets (median, quantiles, ExpMech, binary
  search) and seeded released intervals identical over > 10^4 (n, α, q, ε, C) cases from
  n = 1 to 2·10^7.

Values below the normal range (< 2.2e-308) carry only an absolute accuracy of ~1e-308,
as in SciPy.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["binom_cdf", "binom_log_pmf", "binom_sf"]

#: δ(m) = log m! − log(√(2πm)·(m/e)^m) for m = 0..15, correctly rounded (δ(0) unused).
_STIRLERR = np.array([
    0.0,
    0.08106146679532726, 0.0413406959554093, 0.02767792568499834, 0.020790672103765093,
    0.016644691189821193, 0.013876128823070748, 0.01189670994589177, 0.010411265261972096,
    0.009255462182712733, 0.00833056343336287, 0.007573675487951841, 0.00694284010720953,
    0.006408994188004207, 0.0059513701127588475, 0.005554733551962801,
])
_S0, _S1, _S2, _S3, _S4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
_LOG_2PI = math.log(2.0 * math.pi)
#: Terms below e^-800 are dropped: n·e^-800 < 2^-1075 (half the smallest subnormal).
_LOG_CUTOFF = -800.0


def _stirlerr(m: NDArray[np.float64]) -> NDArray[np.float64]:
    """δ(m) for integer-valued m ≥ 1 (float array): table for m ≤ 15, series above."""
    out = np.empty_like(m)
    small = m <= 15
    out[small] = _STIRLERR[m[small].astype(np.int64)]
    big = ~small
    if big.any():
        x = m[big]
        x2 = x * x
        # Series truncated where the next term is < 2^-53 of δ (R's nmath thresholds).
        val = np.where(
            x > 500, (_S0 - _S1 / x2) / x,
            np.where(
                x > 80, (_S0 - (_S1 - _S2 / x2) / x2) / x,
                np.where(
                    x > 35, (_S0 - (_S1 - (_S2 - _S3 / x2) / x2) / x2) / x,
                    (_S0 - (_S1 - (_S2 - (_S3 - _S4 / x2) / x2) / x2) / x2) / x,
                ),
            ),
        )
        out[big] = val
    return out


def _deviance(x: NDArray[np.float64], mean: float) -> NDArray[np.float64]:
    """D(x, M) = x·log(x/M) + M − x ≥ 0 for x ≥ 1, M > 0, without cancellation."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = (x - mean) / (x + mean)
    out = x * np.log(x / mean) + mean - x
    near = np.abs(v) < 0.5
    if near.any():
        xv, vv = x[near], v[near]
        s = (xv - mean) * vv
        term = 2.0 * xv * vv
        v2 = vv * vv
        for j in range(1, 200):
            term = term * v2
            step = term / (2 * j + 1)
            s = s + step
            if not np.any(np.abs(step) > 2.0**-60 * np.abs(s)):
                break
        out[near] = s
    return np.maximum(out, 0.0)


def _log_share(rest: NDArray[np.float64], nf: float) -> NDArray[np.float64]:
    """log((n − x)/n) from the exact integer n − x: ``log1p(−x/n)`` would lose
    2^-53·n/(n − x) relatively when x is near n."""
    return np.where(rest >= 0.5 * nf, np.log1p(-(nf - rest) / nf), np.log(rest / nf))


def binom_log_pmf(k: ArrayLike, n: int, p: float) -> NDArray[np.float64]:
    """log P(B = k) for B ~ Bin(n, p); −inf off the support and for non-integer k.

    Parameters
    ----------
    k : array_like
        Points (any shape).
    n : int
        Trials, n ≥ 0.
    p : float
        Success probability in [0, 1].
    """
    kk = np.asarray(k, dtype=np.float64)
    if kk.size == 1 and n > 0 and 0.0 < p < 1.0:
        x1 = float(kk.reshape(-1)[0])
        if 0.0 < x1 < n and math.floor(x1) == x1:  # one interior point: scalar arithmetic
            return np.full(kk.shape, _log_pmf_one(x1, n, p))
    flat = kk.reshape(-1)
    out = np.full(flat.shape, -np.inf)
    ok = (flat >= 0) & (flat <= n) & (np.floor(flat) == flat)
    nf = float(n)
    if p <= 0.0 or p >= 1.0 or n == 0:
        point = 0.0 if (p <= 0.0 or n == 0) else nf
        out[ok & (flat == point)] = 0.0
        return out.reshape(kk.shape)
    q = 1.0 - p
    mean, mean_q = nf * p, nf * q
    x = flat[ok]
    val = np.empty_like(x)
    zero, full = x == 0, x == nf
    val[zero] = nf * math.log1p(-p)
    val[full] = nf * math.log(p)
    mid = ~(zero | full)
    if mid.any():
        xm = x[mid]
        rest = nf - xm
        val[mid] = (
            float(_stirlerr(np.array([nf]))[0]) - _stirlerr(xm) - _stirlerr(rest)
            - _deviance(xm, mean) - _deviance(rest, mean_q)
            - 0.5 * (_LOG_2PI + np.log(xm) + _log_share(rest, nf))
        )
    out[ok] = val
    return out.reshape(kk.shape)


def _np_log(v: float) -> float:
    return float(np.log(v))


def _np_log1p(v: float) -> float:
    return float(np.log1p(v))


def _stirlerr_one(m: float) -> float:
    """:func:`_stirlerr` at one point, the same operations in the same order."""
    if m <= 15:
        return float(_STIRLERR[int(m)])
    x2 = m * m
    if m > 500:
        return (_S0 - _S1 / x2) / m
    if m > 80:
        return (_S0 - (_S1 - _S2 / x2) / x2) / m
    if m > 35:
        return (_S0 - (_S1 - (_S2 - _S3 / x2) / x2) / x2) / m
    return (_S0 - (_S1 - (_S2 - (_S3 - _S4 / x2) / x2) / x2) / x2) / m


def _deviance_one(x: float, mean: float) -> float:
    """:func:`_deviance` at one point (x ≥ 1, mean > 0), the same operations in order."""
    v = (x - mean) / (x + mean)
    if abs(v) < 0.5:
        s = (x - mean) * v
        term = 2.0 * x * v
        v2 = v * v
        for j in range(1, 200):
            term = term * v2
            step = term / (2 * j + 1)
            s = s + step
            if not abs(step) > 2.0**-60 * abs(s):
                break
        out = s
    else:
        out = x * _np_log(x / mean) + mean - x
    return out if (out >= 0.0 or out != out) else 0.0  # np.maximum(out, 0.0)


def _log_pmf_one(x: float, n: int, p: float) -> float:
    """log P(B = x) for one integer 0 < x < n, 0 < p < 1: :func:`binom_log_pmf`'s value.

    The array path spends ~0.2 ms of NumPy call overhead on a single point (the binomial
    windows' modes, one per new n); this is the same arithmetic on Python floats (IEEE
    binary64, the same rounding as NumPy's element-wise operations, in the same order)
    with the logarithms from the same NumPy ufuncs, so the value is bit-identical
    (tests/median/test_binomial.py compares the two paths).
    """
    nf = float(n)
    mean, mean_q = nf * p, nf * (1.0 - p)
    rest = nf - x
    share = _np_log1p(-(nf - rest) / nf) if rest >= 0.5 * nf else _np_log(rest / nf)
    return (
        _stirlerr_one(nf) - _stirlerr_one(x) - _stirlerr_one(rest)
        - _deviance_one(x, mean) - _deviance_one(rest, mean_q)
        - 0.5 * (_LOG_2PI + _np_log(x) + share)
    )


def _edge(n: int, p: float, lo: int, hi: int, *, rising: bool) -> int:
    """Outermost x in [lo, hi] with log pmf(x) ≥ cutoff, the pmf monotone on [lo, hi].

    ``rising``: the pmf increases on [lo, hi] (the left flank) and the smallest such x is
    returned; else the largest. The endpoint nearest the mode must qualify.
    """
    while hi - lo > 64:
        # Spacing (hi − lo)/32 > 2: the rounded points are distinct and increasing.
        grid = np.linspace(lo, hi, 33).round().astype(np.int64)
        good = binom_log_pmf(grid, n, p) >= _LOG_CUTOFF
        if rising:
            i = int(np.argmax(good))  # first qualifying grid point
            lo, hi = (int(grid[i - 1]) + 1 if i else lo), int(grid[i])
        else:
            i = good.size - 1 - int(np.argmax(good[::-1]))  # last qualifying
            lo, hi = int(grid[i]), (int(grid[i + 1]) - 1 if i + 1 < good.size else hi)
    xs = np.arange(lo, hi + 1)
    good = binom_log_pmf(xs, n, p) >= _LOG_CUTOFF
    return int(xs[np.argmax(good)] if rising else xs[good.size - 1 - np.argmax(good[::-1])])


def _blocked_cumsum(w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Running sums of non-negative ``w``, each within (b + m/b + 2)·2^-53 relatively."""
    m = w.size
    b = max(16, 1 << max(0, math.ceil(math.log2(math.sqrt(max(m, 1))))))
    blocks = -(-m // b)
    padded = np.zeros(blocks * b)
    padded[:m] = w
    within = np.cumsum(padded.reshape(blocks, b), axis=1)
    offsets = np.concatenate(([0.0], np.cumsum(within[:, -1])[:-1]))
    return (within + offsets[:, None]).reshape(-1)[:m]


@functools.lru_cache(maxsize=8)  # ~16·√(npq)·80 bytes each
def _tails(n: int, p: float) -> tuple[int, NDArray[np.float64], NDArray[np.float64]]:
    """(L, low, high): low[i] = P(L ≤ B ≤ L + i), high[i] = P(B ≥ L + i) over [L, U].

    [L, U] = {x : P(B = x) ≥ e^-800}; the mass outside it is < 2^-1075 (see the module
    docstring). Arrays are read-only (cached).
    """
    mode = min(n, max(0, math.floor((n + 1) * p)))
    lo = _edge(n, p, 0, mode, rising=True)
    hi = _edge(n, p, mode, n, rising=False)
    pmf = np.exp(binom_log_pmf(np.arange(lo, hi + 1, dtype=np.float64), n, p))
    low = _blocked_cumsum(pmf)
    high = _blocked_cumsum(pmf[::-1])[::-1].copy()
    low.setflags(write=False)
    high.setflags(write=False)
    return lo, low, high


def _check(n: int, p: float) -> tuple[int, float]:
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ValueError(f"n={n!r}: expected an integer number of trials ≥ 0.")
    pf = float(p)
    if not 0.0 <= pf <= 1.0:
        raise ValueError(f"p={p!r}: expected a probability in [0, 1].")
    return int(n), pf


def _lower_upper(k: ArrayLike, n: int, p: float) -> tuple[Any, Any]:
    """(P(B ≤ k), P(B > k)) for integer k = ⌊k⌋, each accurate relatively where ≤ 1/2."""
    n, p = _check(n, p)
    kk = np.floor(np.asarray(k, dtype=np.float64))
    if n == 0 or p <= 0.0 or p >= 1.0:
        point = 0 if (n == 0 or p <= 0.0) else n
        below = np.where(kk >= point, 1.0, 0.0)
        return below, 1.0 - below
    lo, low, high = _tails(n, p)
    hi = lo + low.size - 1
    # P(B ≤ k): the running sum up to k (0 below L: the dropped mass rounds to zero).
    i = np.clip(kk - lo, -1, low.size - 1).astype(np.int64)
    below = np.where(i >= 0, low[np.maximum(i, 0)], 0.0)
    # P(B > k) = P(B ≥ k + 1): the running sum from the top down.
    j = np.clip(kk + 1 - lo, 0, high.size).astype(np.int64)
    above = np.where(j < high.size, high[np.minimum(j, high.size - 1)], 0.0)
    above = np.where(kk + 1 > hi, 0.0, above)
    below_out = np.where(below <= 0.5, below, 1.0 - above)
    above_out = np.where(above <= 0.5, above, 1.0 - below)
    return np.clip(below_out, 0.0, 1.0), np.clip(above_out, 0.0, 1.0)


def binom_cdf(k: ArrayLike, n: int, p: float) -> Any:
    """P(B ≤ k) for B ~ Bin(n, p) and any real k (⌊k⌋; 0 below 0, 1 from n on).

    Relative error ≲ 6e-14·(1 + |ln P|) for n ≤ 2·10^7 (the module docstring says why): 3e-13
    at the α/2 levels of rank targets. A float for scalar ``k``, else an array of ``k``'s
    shape.
    """
    out = _lower_upper(k, n, p)[0]
    return float(out) if np.ndim(out) == 0 else out


def binom_sf(k: ArrayLike, n: int, p: float) -> Any:
    """P(B > k) for B ~ Bin(n, p) and any real k (⌊k⌋; 1 below 0, 0 from n on).

    Accuracy as :func:`binom_cdf`.
    """
    out = _lower_upper(k, n, p)[1]
    return float(out) if np.ndim(out) == 0 else out

r"""Binomial–Gaussian mixture tails for the tree tests at any quantile level p.

For the q-quantile the per-point tests of CDFPostProcess (:mod:`dpfair.median._cdf`)
compare a noisy count with the mixture Bin(n, p) + N(0, σ²): p = q for the upper end
(records ≤ a grid point below x_q) and p = 1 − q for the lower end (records above a grid
point above x_q). For p = 1/2 the median's own implementation is used (same numbers).

The survival function Σ_k P(B = k)·Φ̄((k − c)/σ) is summed over the window
n·p ± (5·√n + 2), outside which Bin(n, p) has mass < 2e^{-50} < 4e-22 (Hoeffding:
P(|B − np| ≥ t) ≤ 2·exp(−2t²/n) for every p). That discarded mass is *added*, so a test
can only become more conservative.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special, stats

from dpfair.median import _cdf as median_cdf

__all__ = ["envelope_threshold", "mixture_sf"]

_BLOCK = 64


@functools.lru_cache(maxsize=32)
def _support(n: int, p: float) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    half = 5.0 * math.sqrt(n) + 2.0
    k_lo = max(0, math.floor(n * p - half))
    k_hi = min(n, math.ceil(n * p + half))
    k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
    pmf = np.asarray(stats.binom.pmf(k, n, p), dtype=np.float64)
    dropped = 0.0 if (k_lo == 0 and k_hi == n) else 2.0 * math.exp(-50.0)
    k.setflags(write=False)
    pmf.setflags(write=False)
    return k, pmf, dropped


def mixture_sf(
    c: NDArray[np.float64],
    sigma: NDArray[np.float64] | float,
    n: int,
    p: float,
    *,
    sigma_above: NDArray[np.float64] | float | None = None,
) -> NDArray[np.float64]:
    """P(B + N(0, σ²) > c) for B ~ Bin(n, p), vectorised over c (and σ).

    With ``sigma_above`` the noise level used for binomial values k > c is ``sigma_above``
    (the envelope of :func:`envelope_threshold`). An upper bound: the binomial mass outside
    the summation window is added.
    """
    if p == 0.5:
        return median_cdf.mixture_sf(c, sigma, n, sigma_above=sigma_above)
    c_arr = np.atleast_1d(np.asarray(c, dtype=np.float64))
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), c_arr.shape)
    sig_up = sig if sigma_above is None else np.broadcast_to(
        np.asarray(sigma_above, dtype=np.float64), c_arr.shape)
    k, pmf, dropped = _support(n, p)
    out = np.empty_like(c_arr)
    reach = 40.0 * np.maximum(sig, sig_up)
    far_below = c_arr < k[0] - reach
    far_above = c_arr > k[-1] + reach
    out[far_below] = 1.0
    out[far_above] = 0.0
    todo = np.flatnonzero(~(far_below | far_above))
    for start in range(0, todo.size, _BLOCK):
        sl = todo[start : start + _BLOCK]
        diff = k[None, :] - c_arr[sl, None]
        scale = np.where(diff > 0, sig_up[sl, None], sig[sl, None])
        out[sl] = special.ndtr(diff / scale) @ pmf
    return np.minimum(out + dropped, 1.0)


@functools.lru_cache(maxsize=1024)
def envelope_threshold(n: int, p: float, sigma_min: float, sigma_max: float,
                       level: float) -> float:
    """The threshold a with E_B[q_env(B, a)] = level, B ~ Bin(n, p) (see ``_cdf``).

    q_env(b, a) = Φ̄((a − b)/σ_max) for b ≤ a and Φ̄((a − b)/σ_min) for b > a dominates
    P(b + N(0, σ²) ≥ a) for every σ in [σ_min, σ_max]. Returned 1e-9 above the root, so
    rejecting at ≥ a keeps the level. A pure function of public values, cached.
    """
    def gap(a: float) -> float:
        sf = mixture_sf(np.array([a]), sigma_max, n, p, sigma_above=sigma_min)
        return float(sf[0]) - level

    lo, hi = -10.0 * sigma_max, n + 10.0 * sigma_max + 10.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-10, rtol=1e-14, maxiter=500)
    return float(root) + 1e-9

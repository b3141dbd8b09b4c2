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
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special, stats

from dpfair.mechanisms import NoisyBinaryTree, leaf_edges
from dpfair.median._result import DPCdf
from dpfair.privacy import Accountant, Budget

__all__ = ["cdf_interval", "mixture_sf"]

_BLOCK = 64


@functools.lru_cache(maxsize=16)
def _binomial_support(n: int) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Support window n/2 ± 5·sqrt(n) (+2) of Bin(n, 1/2), its pmf, and a bound on the rest.

    Hoeffding: P(|B − n/2| ≥ t) ≤ 2·exp(−2t²/n) = 2e^{−50} < 4e-22 for t = 5·sqrt(n).
    """
    half = 5.0 * math.sqrt(n) + 2.0
    k_lo = max(0, math.floor(n / 2.0 - half))
    k_hi = min(n, math.ceil(n / 2.0 + half))
    k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
    pmf = np.asarray(stats.binom.pmf(k, n, 0.5), dtype=np.float64)
    dropped = 0.0 if (k_lo == 0 and k_hi == n) else 2.0 * math.exp(-50.0)
    k.setflags(write=False)
    pmf.setflags(write=False)
    return k, pmf, dropped


def mixture_sf(
    c: NDArray[np.float64],
    sigma: NDArray[np.float64] | float,
    n: int,
    *,
    sigma_above: NDArray[np.float64] | float | None = None,
) -> NDArray[np.float64]:
    """P(B + N(0, σ²) > c) for B ~ Bin(n, 1/2), vectorised over c (and σ).

    With ``sigma_above`` the noise level used for binomial values k > c is
    ``sigma_above`` instead of ``sigma`` (the envelope of :mod:`dpfair.median._cdf`).
    The binomial mass left out of the support window is added (an upper bound). Points
    c more than 40 noise standard deviations outside the window are answered in closed
    form (the Gaussian tail there is below 1e-300).
    """
    c_arr = np.atleast_1d(np.asarray(c, dtype=np.float64))
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), c_arr.shape)
    sig_up = sig if sigma_above is None else np.broadcast_to(
        np.asarray(sigma_above, dtype=np.float64), c_arr.shape)
    k, pmf, dropped = _binomial_support(n)
    out = np.empty_like(c_arr)
    reach = 40.0 * np.maximum(sig, sig_up)
    far_below = c_arr < k[0] - reach
    far_above = c_arr > k[-1] + reach
    out[far_below] = 1.0
    out[far_above] = 0.0
    todo = np.flatnonzero(~(far_below | far_above))
    for start in range(0, todo.size, _BLOCK):
        sl = todo[start : start + _BLOCK]
        diff = k[None, :] - c_arr[sl, None]  # k − c
        scale = np.where(diff > 0, sig_up[sl, None], sig[sl, None])
        out[sl] = special.ndtr(diff / scale) @ pmf
    return np.minimum(out + dropped, 1.0)


def _envelope_threshold(n: int, sigma_min: float, sigma_max: float, level: float) -> float:
    """The a with E_B[q_env(B, a)] = level (the map is continuous and decreasing in a).

    Returned slightly above the root (by 1e-9), so rejecting at ≥ a keeps the level.
    """

    def gap(a: float) -> float:
        sf = mixture_sf(np.array([a]), sigma_max, n, sigma_above=sigma_min)
        return float(sf[0]) - level

    lo, hi = -10.0 * sigma_max, n + 10.0 * sigma_max + 10.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-10, rtol=1e-14, maxiter=500)
    return float(root) + 1e-9


def cdf_interval(
    leaves: NDArray[np.int64],
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    depth: int,
    rng: np.random.Generator,
    *,
    envelope: bool = False,
) -> tuple[float, float, Budget, dict[str, Any], DPCdf]:
    """Run CDFPostProcess on 2^depth leaf counts (``mechanisms.leaf_counts`` layout).

    Returns (low, high, spent, diagnostics, cdf).
    """
    n = int(np.sum(leaves))
    a, b = bounds
    grid = leaf_edges((a, b), depth)
    tree = NoisyBinaryTree.for_zcdp(depth, rho, root="public")
    acct = Accountant(Budget.zcdp(rho))
    acct.charge(tree.privacy, label="cdf/tree")
    released = tree.release(leaves, rng=rng)
    consistent = released.consistent()
    prefix = np.asarray(consistent.prefix, dtype=np.float64)
    std = np.asarray(consistent.prefix_std, dtype=np.float64)

    inner = np.arange(1, 2**depth)
    below = prefix[inner]  # C̃_j: records ≤ g_j
    above = n - below  # records > g_j
    sig = std[inner]
    # The node noise is the exact discrete Gaussian (mechanisms.discrete_gaussian), so C̃_j
    # is c(g_j) plus a linear combination T of discrete Gaussians rather than N(0, σ_j²):
    # P(T ≥ u) ≤ f·Φ̄((u − w_j)/σ⁺_j) (LatticeNoise.combination_bound; w_j ≤ 0.4 % of σ_j,
    # σ⁺_j/σ_j − 1 ≤ 2.5e-4, f − 1 ≤ 1e-12). The tests use this bound, so their level stays
    # ≤ α/2 for the executed noise; T is symmetric, so the same bound serves both ends.
    sig_plus, shift, factor = tree.noise.combination_bound(sig, tree.n_noisy_nodes)
    level = alpha / 2.0 / factor
    if envelope:
        s_min, s_max = float(sig_plus.min()), float(sig_plus.max())
        thresh = _envelope_threshold(n, s_min, s_max, level) + float(shift.max())
        reject_upper = below >= thresh
        reject_lower = above >= thresh
    else:
        reject_upper = mixture_sf(below - shift, sig_plus, n) <= level
        reject_lower = mixture_sf(above - shift, sig_plus, n) <= level

    keep_u = inner[~reject_upper]
    j_star = int(keep_u.max()) if keep_u.size else 0
    keep_l = inner[~reject_lower]
    j_low = int(keep_l.min()) if keep_l.size else 2**depth
    low, high = float(grid[j_low - 1]), float(grid[j_star + 1])
    diagnostics: dict[str, Any] = {
        "depth": depth,
        "bins": 2**depth,
        "sigma_node": tree.sigma,
        "prefix_std_range": (float(sig.min()), float(sig.max())),
        "upper_index": j_star + 1,
        "lower_index": j_low - 1,
        "envelope": envelope,
        "ledger": [(e.label, e.budget.rho) for e in acct.records],
    }
    cdf = DPCdf(grid=grid, values=prefix / n, std=std / n)
    return low, high, acct.spent, diagnostics, cdf

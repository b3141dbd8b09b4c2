r"""NoisyBinSearch: noisy binary search for the two target ranks (paper 004, §3, supp. C).

The paper's pseudo-code is lost; this is our restatement, with a proof that does not rely
on a union bound between sampling and privacy error.

Search. Let g_0 = a < g_1 < … < g_{2^D} = b be the grid of 2^D equal bins over the public
range (bin width ≤ θ). For the lower end we look for the largest grid point whose count
c(g) = #{x_i ≤ g} is at most the target rank kL: keep (lo, hi) = (0, 2^D); at each of the
D steps query g = g_mid with fresh noise, c̃ = c(g) + N(0, σ²), and move lo ← mid if
c̃ ≤ kL, else hi ← mid. Output L = g_lo. The upper end mirrors it with the test c̃ ≥ kU and
output U = g_hi. Each query is a count: sensitivity 1 under replace-one.

Coverage. Given B = m (B = #{x_i ≤ med} ~ Bin(n, 1/2)): L > med needs lo to have moved to
a g > med, where c(g) ≥ m, at a step whose test passed, c̃ ≤ kL, i.e. noise ≤ kL − m. The
D noises are fresh given the past, so for m > kL this has probability at most
tail(m − kL) with tail(t) = min(1, D·Φ̄(t/σ)) (union over the D steps). For m ≤ kL we
bound by 1. Therefore P(L > med) ≤ P(B ≤ kL) + Σ_{m>kL} P(B = m)·tail(m − kL), the same
exact conditional bound as ExpMech with a Gaussian tail; kL is the largest rank that keeps
it ≤ α/2 and kU = n − kL by symmetry (the upper failure needs noise ≥ kU − m at a grid
point g < med, where c(g) ≤ m).

Privacy. 2·D Gaussian count queries with σ² = D/ρ: each is 1/(2σ²) = ρ/(2D)-zCDP, and
adaptive composition of zCDP adds up to exactly ρ (the accountant is a filter that refuses
any query past ρ). The noisy counts themselves may be released (diagnostics).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InsufficientDataError
from dpfair.mechanisms import GaussianMechanism, LatticeNoise, leaf_edges
from dpfair.median._ranks import (
    gaussian_union_tail,
    generic_lower_failure,
    lower_target_rank,
)
from dpfair.privacy import Accountant, Budget

__all__ = ["binsearch_interval", "binsearch_target_ranks", "grid_depth"]


def grid_depth(range_width: float, granularity: float) -> int:
    """Smallest D with bin width |R|/2^D ≤ θ (at least 1)."""
    return max(1, math.ceil(math.log2(range_width / granularity) - 1e-12))


def _query_noise(n: int, sigma: float) -> LatticeNoise:
    """Exact discrete Gaussian noise of the queries (public: from n and σ only)."""
    return LatticeNoise.for_sigma(sigma, float(n) + 64.0 * sigma)


@functools.lru_cache(maxsize=256)
def binsearch_target_ranks(n: int, sigma: float, depth: int, alpha: float) -> tuple[int, int]:
    """(kL, kU) for NoisyBinSearch with per-query noise σ and D queries per end.

    The query noise is the exact discrete Gaussian of :func:`_query_noise`, whose tail is
    P(Z ≥ t) ≤ Φ̄((t − 2^-b)/σ_S) for lattice points t > 0 (``LatticeNoise``; σ_S ≥ σ is
    the lattice variance parameter's root, 2^-b the spacing). A wrong decision at rank
    error t ≥ 1 needs |Z| ≥ t, so the union bound uses that tail.
    """
    noise = _query_noise(n, sigma)
    base = gaussian_union_tail(noise.scale, depth)

    def tail(t: NDArray[np.float64]) -> NDArray[np.float64]:
        return base(np.asarray(t, dtype=np.float64) - noise.step)

    # Beyond t_max the Gaussian union bound is < 1e-300: negligible, and still bounded.
    # Capped at n + 1: P(B = k + t) = 0 for k + t > n, so the cap changes nothing (and keeps
    # a huge σ, from a tiny ρ, from overflowing).
    t_max = n + 1 if not sigma * 40.0 < n else math.ceil(sigma * 40.0) + 1

    def failure(k: int) -> float:
        return generic_lower_failure(n, tail, k, t_max=t_max)

    k_low = lower_target_rank(failure, n, alpha / 2.0)
    if k_low < 0:
        raise InsufficientDataError(
            f"n={n} is too small for a valid NoisyBinSearch interval at alpha={alpha:g} "
            f"with per-query noise sd {sigma:.4g}: increase n, rho or alpha."
        )
    return k_low, n - k_low


def _search(
    prefix: NDArray[np.int64],
    grid: NDArray[np.float64],
    target: int,
    side: str,
    mech: GaussianMechanism,
    acct: Accountant,
    noise: NDArray[np.float64],
) -> tuple[int, list[tuple[float, float]]]:
    lo, hi = 0, grid.size - 1
    depth = round(np.log2(grid.size - 1))
    # Exact discrete Gaussian noise on a public lattice, added exactly to the integer
    # prefix counts: the noisy counts in the diagnostics are c + Z with Z independent of
    # the data (THREATS.md rule 6). n is public here. In lattice units each query is an
    # integer count (sensitivity 2^b) plus N_Z(0, S), S·4^-b ≥ σ²: (1/(2σ²))-zCDP or less
    # (Canonne–Kamath–Steinke 2020), the mech.privacy charged below.
    queries: list[tuple[float, float]] = []
    for step in range(depth):
        mid = (lo + hi) // 2
        acct.charge(mech.privacy, label=f"binsearch/{side}")
        count = float(prefix[mid])
        noisy = count + float(noise[step])
        queries.append((float(grid[mid]), noisy))
        if side == "lower":
            if noisy <= target:
                lo = mid
            else:
                hi = mid
        elif noisy >= target:
            hi = mid
        else:
            lo = mid
    return (lo if side == "lower" else hi), queries


def binsearch_interval(
    prefix: NDArray[np.int64],
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    rng: np.random.Generator,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """Run NoisyBinSearch; returns (low, high, spent, diagnostics).

    ``prefix[j]`` is the exact count #{x ≤ g_j} at every grid point g_j of the 2^D-bin
    grid over ``bounds`` (only the interior ones are ever queried); n = prefix[-1].
    """
    n = int(prefix[-1])
    a, b = bounds
    depth = round(math.log2(prefix.size - 1))
    grid = leaf_edges((a, b), depth)
    mech = GaussianMechanism.for_zcdp(rho / (2.0 * depth), l2_sensitivity=1.0)
    k_low, k_high = binsearch_target_ranks(n, mech.sigma, depth, alpha)
    acct = Accountant(Budget.zcdp(rho))
    # The 2D noises of both searches are independent of the data and of each other:
    # drawing them up front in one call (first D for the lower end) is the same as drawing
    # each fresh at its query.
    noise = _query_noise(n, mech.sigma).sample(2 * depth, rng)
    i_low, q_low = _search(prefix, grid, k_low, "lower", mech, acct, noise[:depth])
    i_high, q_high = _search(prefix, grid, k_high, "upper", mech, acct, noise[depth:])
    diagnostics: dict[str, Any] = {
        "target_ranks": (k_low, k_high),
        "depth": depth,
        "sigma": mech.sigma,
        "queries_lower": q_low,
        "queries_upper": q_high,
        "n_queries": len(acct.records),
    }
    return float(grid[i_low]), float(grid[i_high]), acct.spent, diagnostics

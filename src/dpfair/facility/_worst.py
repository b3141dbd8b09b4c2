r"""Exact worst cases over CTM (Lemma 7.8): the worst-case (1 − β) level and family maxima.

:func:`worst_case_level` finds, exactly, the smallest k with sup over CTM of P(p_α > k) ≤ β
(Lemma 7.8 reduces the supremum to the data set D_k^CTM); :func:`ctm_family_max` evaluates
FAIR/SWDIFF quantiles and means over the worst cases D_k^CTM and the evenly spaced data
set. Both are computed from the mechanism's exact output law (no Monte Carlo).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair.facility._families import ctm_worst_case
from dpfair.facility._laws import FacilityDistribution, OutputDistribution
from dpfair.facility._mechanism import DPExpMed
from dpfair.facility.bounds import ctm_min_k

__all__ = ["ctm_family_max", "worst_case_level"]

DOMAIN = (0.0, 1.0)


def worst_case_level(
    n: int, epsilon: float, beta: float, widening: float | None = None,
    domain: tuple[float, float] = DOMAIN,
) -> tuple[int, FacilityDistribution]:
    """The exact worst-case (1 − β) level of p_α over CTM, and the law on D_k^CTM there.

    By Lemma 7.8, sup_{D ∈ CTM} P(p_α > k) = P_{D_k}(p_α > k); the smallest k where this is
    ≤ β is found by bisection below :func:`~dpfair.facility.bounds.ctm_min_k` (which satisfies it
    by Thm 7.9's bound) and confirmed exactly.
    """
    mech = DPExpMed(epsilon, domain, widening=widening)
    alpha = mech.widening_for(n)
    k_med = (n + 1) // 2
    top = k_med - 1

    def dist(k: int) -> FacilityDistribution:
        return mech.distribution(ctm_worst_case(n, k, domain), presorted=True)

    def ok(k: int) -> bool:
        return bool(dist(k).loss_sf(k) <= beta)

    hi = min(ctm_min_k(n, epsilon, beta, alpha), top)
    while hi < top and not ok(hi):  # only if Thm 7.9's bound were wrong
        hi += 1
    lo = -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, dist(hi)


def _k_grid(top: int) -> list[int]:
    """0, 1, 2, 3, 5, 8, … (Fibonacci-like) up to ``top``, and ``top`` itself."""
    ks, a, b = [0], 1, 2
    while a < top:
        ks.append(a)
        a, b = b, a + b
    ks.append(top)
    return sorted(set(k for k in ks if 0 <= k <= top))


def ctm_family_max(
    n: int, epsilon: float, level: float, widening: float | None = None,
    domain: tuple[float, float] = DOMAIN,
) -> dict[str, Any]:
    """Largest FAIR/SWDIFF quantile and mean over Lemma 7.8's worst cases and even spacing.

    Evaluates D_k^CTM for k on a Fibonacci grid of [0, k_med − 1] plus the evenly spaced
    data set (the spread extreme of Lemma 7.11), all in CTM, and returns for each metric
    its maximum and where it is attained. A maximum over a family, not a proof of the
    worst case over all of CTM.
    """
    mech = DPExpMed(epsilon, domain, widening=widening)
    lo, hi = domain
    cands: list[tuple[str, NDArray[np.float64]]] = [("uniform", np.linspace(lo, hi, n))]
    for k in _k_grid((n + 1) // 2 - 1):
        cands.append((f"D_{k}", ctm_worst_case(n, k, domain)))
    best: dict[str, Any] = {}
    for label, x in cands:
        vals = _metrics(mech.distribution(x, presorted=True), level)
        for metric, v in vals.items():
            if metric not in best or v > best[metric]:
                best[metric] = v
                best[f"{metric}_at"] = label
    return best


def _metrics(dist: OutputDistribution, level: float) -> dict[str, float]:
    return {
        "fair_quantile": float(dist.fair_quantile(level)),
        "swdiff_quantile": float(dist.swdiff_quantile(level)),
        "expected_fair": dist.expected_fair(),
        "expected_swdiff": dist.expected_swdiff(),
    }


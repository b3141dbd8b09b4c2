"""Monotone correction of a noisy DD curve and the threshold search on the grid.

The population disparity DD(τ) = P(Z ≥ τ | A=1) − P(Z ≤ τ | A=0) is non-increasing in τ, but
its noisy tree estimate on the grid τ_1 < … < τ_K is not. Paper 003 corrects it within a band
of half-width ω around the noisy values d_i:

* :func:`monotone_alg4` (Algorithm 4): left to right f_1 = d_1 + ω,
  f_i = min(f_{i−1}, d_i + ω); if some f_i < d_i − ω no non-increasing sequence of this
  form stays in the band and the outcome is **infeasible** (reported, never hidden). When
  feasible the output is non-increasing and |f_i − d_i| ≤ ω for all i (paper Lemma 30).
* :func:`monotone_alg6` (Algorithm 6, the paper's practical variant): right to left,
  f_K = d_K and f_i = min(u_i, max(l_i, f_{i+1})) with l_i = d_i − ω, u_i = d_i + ω: always
  inside the band, non-increasing wherever the band allows it.
* :func:`monotone_isotonic`: the least-squares non-increasing fit (pool adjacent violators),
  for comparison; no band.

All three clip to [−1, 1] (the range of DD), never to [0, 1]. Everything here is
post-processing of released values: no privacy cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError

__all__ = [
    "ConfidenceSearch",
    "CorrectionMethod",
    "MonotoneResult",
    "ThresholdSearch",
    "confidence_threshold",
    "confidence_z",
    "correct",
    "grid_threshold",
    "monotone_alg4",
    "monotone_alg6",
    "monotone_isotonic",
    "omega",
]

CorrectionMethod = Literal["alg6", "alg4", "isotonic", "none"]
CORRECTIONS: tuple[str, ...] = ("alg6", "alg4", "isotonic", "none")


@dataclass(frozen=True)
class MonotoneResult:
    """Outcome of a monotone correction.

    Attributes
    ----------
    values : ndarray or None
        The corrected sequence; ``None`` when ``feasible`` is False (Algorithm 4 only).
    feasible : bool
        False only for Algorithm 4 when no band-constrained non-increasing fit exists.
    method : str
    omega : float
        Band half-width used (``nan`` for isotonic / none).
    first_violation : int
        For an infeasible Algorithm 4: the first index i with f_i < d_i − ω; else −1.
    monotone : bool
        Whether ``values`` is non-increasing (always for alg4-feasible and isotonic).
    """

    values: NDArray[np.float64] | None
    feasible: bool
    method: str
    omega: float
    first_violation: int = -1
    monotone: bool = True


def _as_seq(d: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(d, dtype=np.float64).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise InvalidParameterError("monotone correction: need a non-empty finite sequence.")
    return arr


def _check_omega(omega_: float) -> float:
    w = float(omega_)
    if not (math.isfinite(w) and w >= 0):
        raise InvalidParameterError(f"omega={omega_!r}: must be a finite number >= 0.")
    return w


def monotone_alg4(d: ArrayLike, omega_: float) -> MonotoneResult:
    """Algorithm 4 (paper 003): f_i = min(f_{i−1}, d_i + ω), infeasible if f_i < d_i − ω.

    ``f`` is the running minimum of d + ω, computed in O(K) (``np.minimum.accumulate``).
    """
    x = _as_seq(d)
    w = _check_omega(omega_)
    f = np.minimum.accumulate(x + w)
    bad = np.flatnonzero(f < x - w)
    if bad.size:
        return MonotoneResult(None, False, "alg4", w, int(bad[0]), monotone=False)
    return MonotoneResult(np.clip(f, -1.0, 1.0), True, "alg4", w)


def monotone_alg6(d: ArrayLike, omega_: float) -> MonotoneResult:
    """Algorithm 6 (paper 003, §A.1): right to left f_i = min(u_i, max(l_i, f_{i+1})).

    Starts from f_K = d_K. The output always satisfies |f_i − d_i| ≤ ω and f_i ≥ f_{i+1}
    wherever the band allows it (a violation remains only where l_{i+1} > u_i … i.e. where
    no band-respecting sequence can be non-increasing locally).
    """
    x = _as_seq(d)
    w = _check_omega(omega_)
    lo, hi = x - w, x + w
    f = np.empty_like(x)
    f[-1] = x[-1]
    prev = x[-1]
    # A sequential recurrence over the grid (K = 2^M + 1 ≤ a few 10^4 points), not over data.
    for i in range(x.size - 2, -1, -1):
        prev = min(hi[i], max(lo[i], prev))
        f[i] = prev
    f = np.clip(f, -1.0, 1.0)
    mono = bool(np.all(np.diff(f) <= 0))
    return MonotoneResult(f, True, "alg6", w, monotone=mono)


def monotone_isotonic(d: ArrayLike) -> MonotoneResult:
    """Least-squares non-increasing fit (scikit-learn's pool-adjacent-violators)."""
    from sklearn.isotonic import isotonic_regression

    x = _as_seq(d)
    f = np.asarray(isotonic_regression(x, increasing=False), dtype=np.float64)
    return MonotoneResult(np.clip(f, -1.0, 1.0), True, "isotonic", float("nan"))


def correct(d: ArrayLike, method: str, omega_: float) -> MonotoneResult:
    """Dispatch on ``method`` ∈ {"alg6", "alg4", "isotonic", "none"}."""
    if method == "alg6":
        return monotone_alg6(d, omega_)
    if method == "alg4":
        return monotone_alg4(d, omega_)
    if method == "isotonic":
        return monotone_isotonic(d)
    if method == "none":
        x = np.clip(_as_seq(d), -1.0, 1.0)
        return MonotoneResult(x, True, "none", float("nan"), monotone=bool(np.all(np.diff(x) <= 0)))
    raise InvalidParameterError(f"correction={method!r}: expected one of {CORRECTIONS}.")


def omega(
    c_omega: float,
    weights: ArrayLike,
    n_cal: ArrayLike,
    epsilons: ArrayLike,
    deltas: ArrayLike,
    depth: int,
    eta_fail: float,
) -> float:
    """Band half-width ω of paper 003 (Lemma 30 / ALGORITHMS.md §C).

    ω = C_ω · sqrt( Σ_s μ_s² M⁴ log(1/δ_s) log(M/η) / (ñ_s² ε_s²) ),

    with μ_s the site weights, ñ_s the calibration sizes (public), (ε_s, δ_s) the budget of
    the site's round-2 release, M the tree depth and η the failure probability. Public.
    """
    mu = np.asarray(weights, dtype=np.float64)
    n = np.asarray(n_cal, dtype=np.float64)
    e = np.asarray(epsilons, dtype=np.float64)
    dl = np.asarray(deltas, dtype=np.float64)
    m = float(depth)
    terms = mu**2 * m**4 * np.log(1.0 / dl) * math.log(m / eta_fail) / (n**2 * e**2)
    return float(c_omega * math.sqrt(float(np.sum(terms))))


@dataclass(frozen=True)
class ThresholdSearch:
    """τ̂ on the grid and how it was found.

    Attributes
    ----------
    tau : float
    index : int
        Grid index of τ̂.
    outcome : str
        ``"zero"`` (|DD↓(0)| ≤ α' + b: no adjustment needed), ``"band"`` (smallest |τ| with
        |DD↓(τ)| ∈ [α' − b, α' + b] on the needed side, b the tolerance), ``"below_band"``
        (no grid point in the band; smallest |τ| with |DD↓| ≤ α' + b), or ``"infeasible"``
        (none of those: the grid point with the smallest |DD↓|).
    dd_at_tau : float
        Corrected DD at τ̂ (a released, noisy quantity).
    target : float
        α' = α − margin.
    """

    tau: float
    index: int
    outcome: str
    dd_at_tau: float
    target: float


def grid_threshold(
    taus: ArrayLike, dd: ArrayLike, alpha: float, tolerance: float
) -> ThresholdSearch:
    """τ̂ = argmin{|τ| : τ ∈ G, |DD↓(τ)| ∈ [α − b, α + b]} on the needed side (paper S3).

    b is the ``tolerance`` band (the paper's ρ; renamed because ρ means zCDP in dpfair).

    The needed side is where DD moves towards 0: τ > 0 if DD↓(0) > 0, τ < 0 otherwise.
    If |DD↓(0)| ≤ α + b the answer is τ̂ = 0 (the unconstrained classifier already meets the
    tolerance). ``taus`` must be increasing and contain 0.
    """
    t = np.asarray(taus, dtype=np.float64)
    f = np.asarray(dd, dtype=np.float64)
    zero = np.flatnonzero(t == 0.0)
    if zero.size != 1 or t.shape != f.shape:
        raise InvalidParameterError("grid_threshold: the grid must contain 0 exactly once.")
    j0 = int(zero[0])
    if abs(f[j0]) <= alpha + tolerance:
        return ThresholdSearch(0.0, j0, "zero", float(f[j0]), alpha)
    side = t > 0 if f[j0] > 0 else t < 0
    absd = np.abs(f)
    order = np.argsort(np.abs(t), kind="stable")
    for mask, outcome in (
        (side & (absd >= alpha - tolerance) & (absd <= alpha + tolerance), "band"),
        (side & (absd <= alpha + tolerance), "below_band"),
    ):
        hits = order[mask[order]]
        if hits.size:
            j = int(hits[0])
            return ThresholdSearch(float(t[j]), j, outcome, float(f[j]), alpha)
    j = int(np.argmin(absd))
    return ThresholdSearch(float(t[j]), j, "infeasible", float(f[j]), alpha)


THRESHOLD_RULES: tuple[str, ...] = ("confidence", "paper")


@dataclass(frozen=True)
class ConfidenceSearch:
    """τ̂ of the confidence rule and its certificate.

    Attributes
    ----------
    tau : float
    index : int
    outcome : str
        ``"certified"`` (τ̂ lies in the certified set C, see :func:`confidence_threshold`)
        or ``"uncertified"`` (C is empty: the noise is too large for α at this z; τ̂ is the
        grid point that violates the two envelopes least).
    dd_at_tau, sd_at_tau : float
        The raw combined estimate and its standard deviation at τ̂.
    upper, lower : float
        The envelopes Ū(τ̂) and L̲(τ̂).
    z : float
    """

    tau: float
    index: int
    outcome: str
    dd_at_tau: float
    sd_at_tau: float
    upper: float
    lower: float
    z: float


def confidence_threshold(
    taus: ArrayLike, dd: ArrayLike, sd: ArrayLike, alpha: float, z: float
) -> ConfidenceSearch:
    """τ̂ = the point of smallest |τ| of the certified set C (the default rule).

    With U(τ) = D̂(τ) + z·sd(τ) and L(τ) = D̂(τ) − z·sd(τ), the monotone envelopes

        Ū(τ_j) = max_{i ≥ j} U(τ_i),     L̲(τ_j) = min_{i ≤ j} L(τ_i)

    are non-increasing, so C = {τ_j : Ū(τ_j) ≤ α and L̲(τ_j) ≥ −α} is a run of consecutive
    grid points. If C is not empty, τ̂ is its point of smallest |τ| (0 when 0 ∈ C).

    Guarantee (``docs/proofs/fairclass_fdp_fair.md`` §Threshold): let D be the population
    DD curve of the released model (non-increasing), τ⁻ the largest grid point with
    D > α and τ⁺ the smallest with D < −α (both fixed given the model). If τ̂ ∈ C and
    D(τ̂) > α then τ̂ ≤ τ⁻, so U(τ⁻) ≤ Ū(τ̂) ≤ α: the estimate at the single fixed point τ⁻
    is more than z·sd below its mean. Likewise D(τ̂) < −α forces L(τ⁺) ≥ −α. Hence
    P(|D(τ̂)| > α and C ≠ ∅) ≤ 2·Φ(−z) when D̂(τ) ~ N(D(τ), ≤ sd(τ)²) at each fixed τ — no
    union bound over the grid is needed.

    If C is empty, τ̂ minimises max(Ū − α, −α − L̲) (ties: smallest |τ|) and the outcome is
    ``"uncertified"`` (reported, not hidden).
    """
    t = np.asarray(taus, dtype=np.float64)
    f = np.asarray(dd, dtype=np.float64)
    s = np.asarray(sd, dtype=np.float64)
    if t.shape != f.shape or t.shape != s.shape or t.ndim != 1:
        raise InvalidParameterError("confidence_threshold: taus, dd, sd must have one shape.")
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(s)) and np.all(s >= 0)):
        raise InvalidParameterError("confidence_threshold: dd, sd must be finite, sd >= 0.")
    zz = float(z)
    if not (math.isfinite(zz) and zz >= 0):
        raise InvalidParameterError(f"z={z!r}: must be a finite number >= 0.")
    upper = np.maximum.accumulate((f + zz * s)[::-1])[::-1]
    lower = np.minimum.accumulate(f - zz * s)
    order = np.argsort(np.abs(t), kind="stable")
    ok = (upper <= alpha) & (lower >= -alpha)
    hits = order[ok[order]]
    if hits.size:
        j, outcome = int(hits[0]), "certified"
    else:
        excess = np.maximum(upper - alpha, -alpha - lower)
        j = int(order[np.argmin(excess[order])])
        outcome = "uncertified"
    return ConfidenceSearch(
        float(t[j]), j, outcome, float(f[j]), float(s[j]), float(upper[j]), float(lower[j]), zz
    )


def confidence_z(fail_prob: float, n_folds: int) -> float:
    """z with 2·n_folds·Φ(−z) = fail_prob (two sides per fold; the folds' DDs average)."""
    from scipy.stats import norm

    return float(norm.isf(fail_prob / (2.0 * n_folds)))

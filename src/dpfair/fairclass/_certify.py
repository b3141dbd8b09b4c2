"""Step S2, certified: a private check that the released threshold keeps |DD| ≤ α.

The exponential-mechanism threshold of :func:`~dpfair.fairclass._threshold.private_fair_threshold`
aims at a target on the calibration curve, but its output is random, the calibration sample
is finite, and the denominators are noisy: the population disparity of the released
classifier can exceed α. The *certified* rule adds one more pure-DP release on the
calibration half and a public margin (``docs/proofs/fairclass_cdp_fair.md`` §10):

1. the EM aims at the shrunk target α_t = max(α − t − γ, 0) (:func:`certified_target`);
2. the check releases D̃ = DD̂(τ̂) + Laplace(Δ/ε_k), Δ = 1/m̃₁ + 1/m̃₀ (sensitivity Δ given the
   released denominators, so ε_k-DP);
3. the fold is *certified* iff |D̃| ≤ α − t, with t = :func:`certification_margin`, a
   function of released and public numbers only (m̃, ε_c, ε_k, β).

Guarantee (per fold, conditional on the S1 release): P(D(τ̂) > α and certified) ≤ β/2 and
P(D(τ̂) < −α and certified) ≤ β/2, where D is the population DD curve of the fold's
classifier. Argument (one fixed point, no union over τ): D is non-increasing; if D(τ̂) > α
then τ̂ lies left of the fixed point τ* = sup{τ : D(τ) > α}, so by monotonicity of the
calibration curve DD̂(τ̂) ≥ DD̂(τ*−), a *fixed* statistic whose mean (with the true group
sizes) is D(τ*−) ≥ α. Certification then forces

    [DD̂_n(τ*−) − D(τ*−)] − c·L + w ≤ −t,     c = p̂₁/m̃₁ + p̂₀/m̃₀ ∈ [0, Δ],

where DD̂_n uses the true calibration group sizes, L ~ Laplace(1/ε_c) is the denominator
noise (m̃₁ = n₁ + L, m̃₀ = n₀ − L) and w the check noise. The sampling term is a difference
of two independent binomial proportions with variance ≤ (1/n₁ + 1/n₀)/4; t is the
β/2-quantile of N(0, s²) + Laplace(Δ/ε_k) − Δ·L⁺ (exact convolution, numerically), with s
evaluated at n_a ≥ m̃_a − ℓ (|L| ≤ ℓ except with probability β/200).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import integrate, optimize, special

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._threshold import DDSteps
from dpfair.mechanisms.gaussian import lattice_bits, snap_to_lattice

__all__ = [
    "FairnessCertificate",
    "certification_margin",
    "certified_target",
    "check_threshold",
    "normal_laplace_cdf",
]

#: Share of the per-side failure probability spent on "|L| ≤ ℓ" (the denominator noise
#: small enough that m̃ − ℓ lower-bounds the true group sizes in the sampling sd).
_SIZE_SLACK = 0.01



def check_lattice(m1: float, m0: float, epsilon_check: float) -> tuple[int, float]:
    """Public lattice 2^-k·ℤ of the check and its Laplace scale b = (Δ + 2^{1−k})/ε_k.

    Floating-point model (``docs/floating_point.md``): the check releases
    snap(DD̂) + snap(W), W ~ Laplace(b), both on 2^-k·ℤ and added exactly, which equals
    snap(snap(DD̂) + W) — a post-processing of the continuous Laplace mechanism on
    snap(DD̂). The computed DD̂ (from integer counts and the released m̃) moves by at most
    Δ plus a few ulps between neighbours, and snapping adds ≤ 2^-k, so Δ + 2^{1−k} bounds
    the sensitivity of what the noise meets. k comes from public numbers only
    (|DD̂| ≤ 1, |W| ≤ 64b except with probability e^-64).
    """
    delta = 1.0 / m1 + 1.0 / m0
    k = lattice_bits(2.0 + 64.0 * (delta + 1.0) / epsilon_check)
    return k, (delta + 2.0 ** (1 - k)) / epsilon_check


#: γ = GAMMA_SCALE · Δ · (1/ε_k + 1/ε_e): how far below α − t the EM aims, so that the
#: check (noise Laplace(Δ/ε_k)) usually passes. Set on the paper's simulation only.
GAMMA_SCALE = 2.0


@dataclass(frozen=True, slots=True)
class FairnessCertificate:
    """The certificate of one fold (all fields are released or public numbers).

    Attributes
    ----------
    released_dd : float
        D̃ = DD̂(τ̂) + Laplace(Δ/ε_k): the private check.
    margin : float
        t: certified iff |D̃| ≤ α − t.
    alpha : float
        The certified cap α.
    fail_prob : float
        β_fold: P(|DD| > α and certified) ≤ β_fold for this fold.
    certified : bool
    target : float
        The EM's target α_t (public).
    """

    released_dd: float
    margin: float
    alpha: float
    fail_prob: float
    certified: bool
    target: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def normal_laplace_cdf(x: float, s: float, b: float) -> float:
    """P(s·N + W ≤ x) for N ~ N(0, 1) and independent W ~ Laplace(0, b), exactly.

    Conditioning on N: P = Φ(x/s) − ½·e^{s²/(2b²) − x/b}·Φ(x/s − s/b)
    + ½·e^{s²/(2b²) + x/b}·Φ(−x/s − s/b), evaluated in log-space (``log_ndtr``).
    """
    if b <= 0:
        return float(special.ndtr(x / s))
    c = s * s / (2.0 * b * b)
    t1 = math.exp(c - x / b + float(special.log_ndtr(x / s - s / b)))
    t2 = math.exp(c + x / b + float(special.log_ndtr(-x / s - s / b)))
    return float(min(max(special.ndtr(x / s) - 0.5 * t1 + 0.5 * t2, 0.0), 1.0))


def _tail(t: float, s: float, b_w: float, b_v: float) -> float:
    """P(s·N + W − V ≤ −t), V = b_v·L⁺ with L ~ Laplace(0, 1) (so L⁺ = 0 w.p. ½, else Exp(1))."""
    head = 0.5 * normal_laplace_cdf(-t, s, b_w)
    if b_v <= 0:
        return 2.0 * head
    # ½ E_{E ~ Exp(1)} [G(−t + b_v E)], integrated in u = b_v E.
    val, _ = integrate.quad(
        lambda u: normal_laplace_cdf(-t + u, s, b_w) * math.exp(-u / b_v) / b_v,
        0.0,
        math.inf,
        limit=200,
        epsabs=1e-12,
    )
    return head + 0.5 * val


def certification_margin(
    m1: float,
    m0: float,
    *,
    epsilon_count: float,
    epsilon_check: float,
    fail_prob_side: float,
) -> float:
    """The public margin t of one side of one fold (module docstring).

    Parameters
    ----------
    m1, m0 : float
        Released calibration denominators (m̃₁ + m̃₀ = n_C).
    epsilon_count, epsilon_check : float
        ε_c of the Laplace count behind m̃ and ε_k of the check.
    fail_prob_side : float
        The failure probability allowed for this side (β/(2K) with K folds).

    Returns
    -------
    float
        t such that P(N(0, s²) + Laplace(Δ/ε_k) − Δ·L⁺ ≤ −t) + P(Δ·L⁺ ≥ t) = 0.99·β_side,
        L ~ Laplace(1/ε_c), s² = (1/(m̃₁ − ℓ) + 1/(m̃₀ − ℓ))/4, ℓ = ln(1/(0.01·β_side))/ε_c.
    """
    p = float(fail_prob_side)
    if not 0.0 < p < 0.5:
        raise InvalidParameterError(
            f"fail_prob={fail_prob_side!r}: the per-side share must be in (0, 0.5)."
        )
    if not (epsilon_count > 0 and epsilon_check > 0):
        raise InvalidParameterError(
            "certification_margin: epsilon_count and epsilon_check must be > 0."
        )
    ell = math.log(1.0 / (_SIZE_SLACK * p)) / epsilon_count
    lo1, lo0 = max(m1 - ell, 1.0), max(m0 - ell, 1.0)
    s = 0.5 * math.sqrt(1.0 / lo1 + 1.0 / lo0)
    delta = 1.0 / m1 + 1.0 / m0
    k, b_w = check_lattice(m1, m0, epsilon_check)  # snapped check (docs/floating_point.md)
    b_v = delta / epsilon_count
    level = (1.0 - _SIZE_SLACK) * p
    hi = 12.0 * s + (b_w + b_v) * (math.log(1.0 / level) + 8.0)

    def excess(t: float) -> float:
        # + P(Δ·L⁺ ≥ t): where the shift exceeds t the normal-sd monotonicity does not apply
        # (docs/proofs/fairclass_cdp_fair.md §10), so that event is charged in full.
        return _tail(t, s, b_w, b_v) + 0.5 * math.exp(-t / b_v) - level

    # + 2^-k: the released D̃ is DD̂ + W up to the two snappings (≤ 2^-k-1 each).
    return float(optimize.brentq(excess, 1e-12, hi, xtol=1e-10)) + 2.0**-k


def certified_target(
    alpha: float,
    margin: float,
    m1: float,
    m0: float,
    *,
    epsilon_threshold: float,
    epsilon_check: float,
    extra_margin: float = 0.0,
) -> float:
    """The EM's target α_t = max(α − t − γ − extra, 0), γ = GAMMA_SCALE·Δ·(1/ε_k + 1/ε_e).

    Public (released m̃ and parameters only); the target does not enter the guarantee, only
    how often the check passes.
    """
    delta = 1.0 / m1 + 1.0 / m0
    gamma = GAMMA_SCALE * delta * (1.0 / epsilon_check + 1.0 / epsilon_threshold)
    return max(alpha - margin - gamma - extra_margin, 0.0)


def check_threshold(
    steps: DDSteps,
    tau: float,
    m1: float,
    m0: float,
    alpha: float,
    *,
    margin: float,
    target: float,
    epsilon_check: float,
    fail_prob: float,
    rng: np.random.Generator,
) -> FairnessCertificate:
    """Release D̃ = DD̂(τ̂) + Laplace(Δ/ε_k) (ε_k-DP) and decide the certificate |D̃| ≤ α − t.

    As executed: snap(DD̂) + snap(W) on the public lattice of :func:`check_lattice`, with
    W ~ Laplace((Δ + 2^{1−k})/ε_k); the margin t includes the snapping's 2^-k.

    ``steps`` is the calibration curve with the released denominators (sensitivity
    Δ = 1/m̃₁ + 1/m̃₀ at every τ, so at τ̂ too: τ̂ is itself a DP release, and the check is a
    Laplace mechanism composed after it). ``fail_prob`` is the fold's β (both sides).
    """
    k, scale = check_lattice(m1, m0, epsilon_check)
    # Snapped before they meet (check_lattice): no low-order bit of DD̂ reaches the output.
    value = snap_to_lattice(steps.at(tau), k)
    released = float(value + snap_to_lattice(rng.laplace(0.0, scale), k))
    ok = abs(released) <= alpha - margin
    return FairnessCertificate(
        released_dd=float(released),
        margin=float(margin),
        alpha=float(alpha),
        fail_prob=float(fail_prob),
        certified=bool(ok),
        target=float(target),
    )

"""Step S2, certified: a private check that the released threshold keeps |DD| ≤ α.

The exponential-mechanism threshold of :func:`~dpfair.fairclass._threshold.private_fair_threshold`
aims at a target on the calibration curve, but its output is random, the calibration sample
is finite, and the denominators are noisy: the population disparity of the released
classifier can exceed α. The *certified* rule adds one more pure-DP release on the
calibration half and a public margin (``docs/proofs/fairclass_cdp_fair.md`` §10):

1. the EM aims at the shrunk target α_t = max(α − t − γ, 0) (:func:`certified_target`;
   under demographic parity raised by :func:`flat_aim` where that is small or 0);
2. the check releases D̃ = DD̂(τ̂) + Laplace(Δ/ε_k), Δ = 1/m̃₁ + 1/m̃₀ (sensitivity Δ given the
   released denominators, so ε_k-DP) — as executed, an exact discrete Laplace on a public
   lattice (:func:`check_lattice`);
3. the fold is *certified* iff −(α − t₋) ≤ D̃ ≤ α − t₊, with per-side margins
   t± = :func:`certification_margin`, functions of released and public numbers only
   (m̃, ε_c, ε_k, β) and of the sign of the released τ̂ (:func:`side_margins`).

One-sided failure allocation (``docs/proofs/fairclass_cdp_fair.md`` §10, "Side
allocation"): with a public share κ ≤ ½ (:data:`SIDE_SHARES`, chosen by
:func:`choose_side_share` from S1's π̃ and public numbers, never from the calibration
half), the side τ̂ points to gets the small margin t(β(1 − κ)) and the other side the large
margin t(βκ) (τ̂ = 0: both small). Guarantee (per fold, conditional on the S1 release):
P(|D(τ̂)| > α and certified) ≤ β, where D is the population DD curve of the fold's
classifier: E₊ ∩ {τ̂ ≥ 0} needs D(0) > α and E₋ ∩ {τ̂ ≤ 0} needs D(0) < −α, which exclude
each other, so at most one side ever sees its small margin. κ = ½ is the symmetric rule
(β/2 per side).

Per side (one fixed point, no union over τ): D is non-increasing; if D(τ̂) > α
then τ̂ lies left of the fixed point τ* = sup{τ : D(τ) > α}, so by monotonicity of the
calibration curve DD̂(τ̂) ≥ DD̂(τ*−), a *fixed* statistic whose mean (with the true group
sizes) is D(τ*−) ≥ α. Certification then forces

    [DD̂_n(τ*−) − D(τ*−)] − c·L + w ≤ −t,     c = p̂₁/m̃₁ + p̂₀/m̃₀ ∈ [0, Δ],

where DD̂_n uses the true calibration group sizes, L ~ Laplace(1/ε_c) is the denominator
noise (m̃₁ = n₁ + L, m̃₀ = n₀ − L) and w the check noise. The sampling term is a difference
of two independent binomial proportions with variance ≤ (1/n₁ + 1/n₀)/4; t is the
β/2-quantile of N(0, s²) + Laplace(Δ/ε_k) − Δ·L⁺ (exact convolution, numerically), with s
evaluated at n_a ≥ m̃_a − ℓ (|L| ≤ ℓ except with probability β/200), plus a continuity
shift ¼(1/n₁ + 1/n₀) (:func:`lattice_shift`: the normal is an approximation of the
binomial difference, exceeded by it at an atom when the check noise is small).

Joint rate bound (``docs/proofs/fairclass_cdp_fair.md`` §10, issue 20 fourth pass): the
variance at rates ½ and the coefficient c at rates 1 are never worst together. Given L,
E[S | L] = D − c(p)·L and Var[S | L] ≤ Σ u_a p_a(1 − p_a) with c(p) ≤ Σ u_a p_a,
u_a = 1/(m̃_a − ℓ); by reflection and Jensen both are dominated by (x(1 − x)U, xU) for one
x ∈ [½, 1], U = u₁ + u₀, so the margin covers every x on public cells of [½, 1]
(:data:`RATE_GRID`, :func:`_rate_root`) and is the smaller of that and the worst-case one
(demographic parity; equal opportunity keeps the worst case). Nothing new is released.

Where the margin comes from (``CertificationPlan.sampling_margin``): on the paper's design at
N = 6000, ε = 1 (m = 900, 2100), t = 0.047 is 0.040 of calibration sampling (no privacy noise),
+0.006 of denominator noise and +0.002 of check noise (symmetric split, β/2 per side; worst-case
margin, before the joint rate bound, which brings the denominator part to 0.003: t = 0.044); no
α ≤ 0.040 certifies at any ε with halves. With the side allocation at κ = 0.05 τ̂'s side has
t = 0.041, 0.038 with the joint rate bound (0.034 of sampling, z_{0.99·0.0475} = 1.68
instead of 1.97) and the other side
0.067; κ < ½ is only chosen where that interval leaves room (larger α), so the gain is a
higher aim, not a smaller certifiable α. The lever for small α remains the calibration size
(the estimator's ``calibration_share``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import integrate, optimize, special

from dpfair._errors import DPFairError, InvalidParameterError
from dpfair.fairclass._laplace_count import count_lattice
from dpfair.fairclass._threshold import DDSteps
from dpfair.mechanisms import (
    LAPLACE_SAFE_SCALE as SAFE_SCALE,
)
from dpfair.mechanisms import (
    discrete_laplace_scale,
    lattice_bits,
    lattice_laplace,
)

__all__ = [
    "AIM_FAIL",
    "AIM_RISE",
    "PLAN_RATE",
    "RATE_GRID",
    "SIDE_SHARES",
    "SIDE_TOLERANCE",
    "TIE_SLACK",
    "FairnessCertificate",
    "SideChoice",
    "UncertifiedFairnessError",
    "aim_scales",
    "aim_slack",
    "certification_margin",
    "certified_target",
    "check_on_uncertified",
    "check_threshold",
    "choose_from_margins",
    "choose_side_share",
    "flat_aim",
    "laplace_sum_sf",
    "lattice_shift",
    "normal_laplace_cdf",
    "pass_probability",
    "refuse_uncertified",
    "side_margins",
    "uncertified_message",
]

#: Share of the per-side failure probability spent on "|L| ≤ ℓ" (the denominator noise
#: small enough that m̃ − ℓ lower-bounds the true group sizes in the sampling sd).
_SIZE_SLACK = 0.01

#: The exponential integral of :func:`_tail` runs over E ∈ [0, _EXP_CUT]; the rest (≤ e^-60)
#: is added in full.
_EXP_CUT = 60.0


def check_lattice(
    m1: float, m0: float, epsilon_check: float, n_bound: float | None = None
) -> tuple[int, int]:
    """Public lattice 2^-k·ℤ of the check and its integer discrete-Laplace scale t.

    Floating-point model (``docs/floating_point.md``): the check releases
    (S + Z)·2^-k with S = rint(DD̂·2^k) the snapped computed DD̂ (an integer) and Z exact
    discrete Laplace, P(Z = z) ∝ exp(−|z|/t)
    (:func:`~dpfair.mechanisms.discrete_laplace.lattice_laplace`).
    Sensitivity of S in lattice units, for the released m̃₁, m̃₀ and n = m̃₁ + m̃₀:
    the real DD̂ = c₁/m̃₁ − c₀/m̃₀ moves by ≤ Δ = 1/m̃₁ + 1/m̃₀ (exact rationals); the
    computed fl(fl(c₁/m̃₁) − fl(c₀/m̃₀)) is within 2.1·2^-53·(c₁/m̃₁ + c₀/m̃₀) ≤ 2^-51·nΔ of
    it (c ≤ n); rint adds ≤ ½ unit each. So |S − S′| ≤ Δ_L = ⌊Δ(1 + n·2^-50)·2^k⌋ + 1 and
    t = ⌈Δ_L/ε_k⌉ gives a pmf ratio ≤ e^{ε_k} exactly, as executed. t·2^-k ≈
    (Δ + 2^-k)/ε_k: the same noise as the real-arithmetic Laplace(Δ/ε_k) up to 2^-k.
    k comes from public numbers only: k = lattice_bits(2 + 64(Δ + 1)/ε_k), lowered while
    t > 2^33 (``SAFE_SCALE``), so the sampler's int64 guard never binds.

    ``n_bound``: a public bound on every count c of the curve (default m̃₁ + m̃₀, the
    calibration size of the demographic-parity curve, whose m̃₀ = n_C − m̃₁). The
    equal-opportunity curve has two independently noisy denominators, so it passes the
    calibration size n_C.
    """
    k, units = check_units(m1, m0, epsilon_check, n_bound)
    return k, discrete_laplace_scale(units, epsilon_check)


def check_units(
    m1: float, m0: float, epsilon_check: float, n_bound: float | None = None
) -> tuple[int, int]:
    """(k, Δ_L) of :func:`check_lattice`: lattice bits and sensitivity in lattice units."""
    delta = Fraction(1) / Fraction(m1) + Fraction(1) / Fraction(m0)
    n = Fraction(m1) + Fraction(m0) if n_bound is None else Fraction(n_bound)
    k = lattice_bits(2.0 + 64.0 * (float(delta) + 1.0) / epsilon_check)
    while True:  # keep t ≤ SAFE_SCALE: the uncapped sampler's int64 guard never binds
        units = math.floor(delta * (1 + n / 2**50) * 2**k) + 1
        if k == 0 or discrete_laplace_scale(units, epsilon_check) <= SAFE_SCALE:
            return k, units
        k -= 1


#: q: the aim leaves room for the threshold's spread and the check's noise so that the
#: check fails with probability ≤ AIM_FAIL on a locally continuous calibration curve.
AIM_FAIL = 0.03

#: The slack floor (DD units): the aim never comes closer than this to α − t, however
#: large ε, so a step of a tied/discrete calibration curve of up to this size straddling
#: the aim cannot make certification fall as ε grows (issue 20).
TIE_SLACK = 0.01

#: The flat-region aim (:func:`flat_aim`, issue 20 fifth pass): where α − t − g is small or
#: negative, the aim may raise the predicted failure probability of aiming at 0 by at most
#: this factor (2: it may add as much failure as aiming at 0 already has) ...
AIM_RISE = 2.0

#: ... and never take the predicted pass probability below this rate (the planner's default
#: ``target_rate``): a calibration share the planner picks because aiming at 0 reaches the
#: rate still reaches it with the flat-region aim.
PLAN_RATE = 0.9

#: κ: the candidate shares of the fold's β for the side *opposite* to τ̂'s sign (the side
#: τ̂ points to gets 1 − κ). ½ is the symmetric rule. Chosen per fit by
#: :func:`choose_side_share` from public numbers and S1's π̃ only.
SIDE_SHARES = (0.5, 0.25, 0.1, 0.05)

#: :func:`choose_side_share` takes the smallest κ whose predicted pass probability is within
#: this of the best one (a smaller κ means a higher aim: less error).
SIDE_TOLERANCE = 0.005


@dataclass(frozen=True, slots=True)
class FairnessCertificate:
    """The certificate of one fold (all fields are released or public numbers).

    Attributes
    ----------
    released_dd : float
        D̃ = DD̂(τ̂) + noise of scale ≈ Δ/ε_k: the private check (exact discrete Laplace on
        the lattice of :func:`check_lattice`).
    margin : float
        The margin of the side τ̂ points to (the smaller one; both sides' when τ̂ = 0):
        t(β_fold·(1 − κ)). With κ = ½ (symmetric) certified iff |D̃| ≤ α − margin, as
        before the side allocation.
    alpha : float
        The certified cap α.
    fail_prob : float
        β_fold: P(|DD| > α and certified) ≤ β_fold for this fold (both sides together).
    certified : bool
        −(α − ``margin_lower``) ≤ D̃ ≤ α − ``margin_upper``.
    target : float
        The EM's target α_t (public).
    margin_upper, margin_lower : float
        t₊ and t₋, the margins of the two sides (default: ``margin``).
    side : {1, 0, -1}
        The sign of the released τ̂: which side got the small margin (0: both).
    side_share : float
        κ: the share of β_fold of the side opposite to τ̂ (½: symmetric).
    """

    released_dd: float
    margin: float
    alpha: float
    fail_prob: float
    certified: bool
    target: float
    margin_upper: float = math.nan
    margin_lower: float = math.nan
    side: int = 0
    side_share: float = 0.5

    def __post_init__(self) -> None:
        for name in ("margin_upper", "margin_lower"):
            if math.isnan(getattr(self, name)):
                object.__setattr__(self, name, float(self.margin))

    @property
    def interval(self) -> tuple[float, float]:
        """(−(α − t₋), α − t₊): the fold is certified iff D̃ lies in it (for messages)."""
        return -(self.alpha - self.margin_lower), self.alpha - self.margin_upper

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


def _tail(t: float, s: float, b_w: float, b_v: float, p_zero: float = 0.5) -> float:
    """P(s·N + W − V ≤ −t), V = 0 w.p. ``p_zero``, else b_v·Exp(1).

    ``p_zero`` = ½: V = b_v·L⁺ with L ~ Laplace(0, 1) (one count, demographic parity).
    ``p_zero`` = 0: V = b_v·E, E ~ Exp(1), which stochastically dominates max(L₁⁺, L₀⁻)
    of two independent Laplace(1) counts (P(max > x) = e^{−x} − ¼e^{−2x} ≤ e^{−x}; equal
    opportunity).
    """
    head = p_zero * normal_laplace_cdf(-t, s, b_w)
    if b_v <= 0:
        return head / p_zero if p_zero > 0 else normal_laplace_cdf(-t, s, b_w)
    # (1 − p_zero)·E_{E ~ Exp(1)} [G(−t + b_v E)], integrated in E itself on [0, 60] (the
    # integrand G ≤ 1, so the rest is ≤ e^-60, added). Integrating in u = b_v·E over
    # [0, ∞) instead lost the kernel when b_v ≪ s (quad never sampled u ≲ b_v): below
    # b_v ≈ 1e-5 the integral came out ≈ 0 and t ≈ z_{2β}·s, twice the allowed failure
    # (large n or large ε; tests/fairclass/test_certified.py::test_margin_tail_integral_*).
    knee = t / b_v  # where the shifted argument −t + b_v E crosses 0
    points = [knee] if 0.0 < knee < _EXP_CUT else None
    val, _ = integrate.quad(
        lambda e: normal_laplace_cdf(-t + b_v * e, s, b_w) * math.exp(-e),
        0.0,
        _EXP_CUT,
        points=points,
        limit=400,
        epsabs=1e-13,
    )
    return head + (1.0 - p_zero) * (val + math.exp(-_EXP_CUT))


def _hypo_density(v: float, c1: float, c0: float) -> float:
    """Density at v ≥ 0 of c₁E₁ + c₀E₀ (E_a ~ Exp(1) independent), stably (expm1)."""
    hi, lo = max(c1, c0), min(c1, c0)
    if hi - lo <= 1e-12 * hi:  # Gamma(2, hi)
        return v * math.exp(-v / hi) / (hi * hi)
    # (e^{−v/hi} − e^{−v/lo})/(hi − lo) = e^{−v/hi}·(−expm1(−v(1/lo − 1/hi)))/(hi − lo)
    return math.exp(-v / hi) * -math.expm1(-v * (1.0 / lo - 1.0 / hi)) / (hi - lo)


def _hypo_sf(v: float, c1: float, c0: float) -> float:
    """P(c₁E₁ + c₀E₀ ≥ v), v ≥ 0."""
    hi, lo = max(c1, c0), min(c1, c0)
    if hi - lo <= 1e-12 * hi:
        return (1.0 + v / hi) * math.exp(-v / hi)
    return (hi * math.exp(-v / hi) - lo * math.exp(-v / lo)) / (hi - lo)


def _tail_two(t: float, s: float, b_w: float, c1: float, c0: float) -> float:
    """P(s·N + W − V ≤ −t) with V = c₁X₁ + c₀X₀, X_a = 0 w.p. ½, else Exp(1), independent.

    Equal opportunity: S − S_n = −p̂₁L₁/m̃₁ + p̂₀L₀/m̃₀ ≥ −(L₁⁺/m̃₁ + L₀⁻/m̃₀), each term 0 w.p.
    ½ and else Exp with scale c_a = b_c/m̃_a. V is a mixture: 0 (¼), c₁E (¼), c₀E (¼), and the
    hypoexponential c₁E₁ + c₀E₀ (¼). Each part is one integral in its own scale.
    """
    out = 0.25 * normal_laplace_cdf(-t, s, b_w)
    for c in (c1, c0):
        out += 0.25 * _tail(t, s, b_w, c, p_zero=0.0)
    scale = c1 + c0
    val, _ = integrate.quad(
        lambda e: normal_laplace_cdf(-t + scale * e, s, b_w) * _hypo_density(scale * e, c1, c0)
        * scale,
        0.0,
        _EXP_CUT,
        points=[t / scale] if 0.0 < t / scale < _EXP_CUT else None,
        limit=400,
        epsabs=1e-13,
    )
    # the rest: V ≥ 60(c₁ + c₀), probability ≤ _hypo_sf, integrand ≤ 1.
    return out + 0.25 * (val + _hypo_sf(_EXP_CUT * scale, c1, c0))


def _two_sf(t: float, c1: float, c0: float) -> float:
    """P(V ≥ t) for the V of :func:`_tail_two`."""
    return 0.25 * (math.exp(-t / c1) + math.exp(-t / c0) + _hypo_sf(t, c1, c0))


def certification_margin(
    m1: float,
    m0: float,
    *,
    epsilon_count: float,
    epsilon_check: float,
    fail_prob_side: float,
    counts: int = 1,
    n_public: float | None = None,
    rate_bound: bool = True,
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
        t such that P(N(0, s²) + Laplace(b_w) − Δ·L⁺ ≤ −t) + P(Δ·L⁺ ≥ t) = 0.99·β_side,
        L ~ Laplace(b_c), s² = (1/(m̃₁ − ℓ) + 1/(m̃₀ − ℓ))/4, ℓ = ln(1/(0.01·β_side))·b_c
        + 2^-k_c, plus the lattice slack 1.5·2^-k + 2^-51·nΔ + Δ·2^-k_c. Here b_c =
        t_c·2^-k_c ≈ 1/ε_c and b_w = t_w·2^-k ≈ Δ/ε_k are the scales of the executed
        discrete Laplace noises (:func:`~dpfair.fairclass._laplace_count.count_lattice`,
        :func:`check_lattice`), each coupled within one lattice unit to the continuous
        law of that scale; n = m̃₁ + m̃₀.
    counts : {1, 2}, default 1
        1: demographic parity, m̃₁ = n₁ + L and m̃₀ = n_C − m̃₁ (one Laplace count at ε_c).
        2: equal opportunity, m̃_a = n_{a,1} + L_a, two independent Laplace counts at
        ε_c/2 each (the pair has L1 sensitivity 2). Then S − S_n = −p̂₁L₁/m̃₁ + p̂₀L₀/m̃₀ ≥
        −(L₁⁺/m̃₁ + L₀⁻/m̃₀), two independent terms, each 0 w.p. ½ and else Exp(b_c/m̃_a)
        (:func:`_tail_two`; before, the cruder Δ·Exp(b_c) ≥ Δ·max(L₁⁺, L₀⁻));
        "|L_a| ≤ ℓ" is charged 0.005·β_side per count.
    n_public : float, optional
        The public calibration size n_C (default m̃₁ + m̃₀; pass it with ``counts=2``).
    rate_bound : bool, default True
        ``counts=1`` only: also solve the *joint* bound of :func:`_rate_root` and return the
        smaller of the two margins (both are valid, ``docs/proofs/fairclass_cdp_fair.md``
        §10, "Joint rate bound"). The worst-case variance ¼ (rates ½) and the worst-case
        denominator coefficient Δ (rates 1) cannot occur together: with both tied to the
        same unknown rates the count noise costs about half as much (t: 0.0407 → 0.0381 at
        m̃ = (900, 2100), ε = 1, κ = 0.05). ``False``: the previous margin (both worst cases).
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
    # Both noises are exact discrete Laplace on lattices (docs/floating_point.md); each is
    # within one lattice unit of a continuous Laplace of its own scale (quantile coupling),
    # and the tail computation below runs on those continuous laws, the couplings' slack
    # added to t at the end.
    if counts not in (1, 2):
        raise InvalidParameterError(f"counts={counts!r}: expected 1 or 2.")
    n_cal = round(m1 + m0) if n_public is None else round(n_public)
    eps_each = epsilon_count / counts
    k_c, t_c = count_lattice(n_cal, eps_each)
    b_c = math.ldexp(t_c, -k_c)  # scale of each count noise L, ≥ counts/ε_c
    k, t_w = check_lattice(m1, m0, epsilon_check, None if n_public is None else n_cal)
    b_w = math.ldexp(t_w, -k)  # scale of the check noise w, ≥ Δ/ε_k
    ell = math.log(counts / (_SIZE_SLACK * p)) * b_c + math.ldexp(1.0, -k_c)
    lo1, lo0 = max(m1 - ell, 1.0), max(m0 - ell, 1.0)
    s = 0.5 * math.sqrt(1.0 / lo1 + 1.0 / lo0)
    delta = 1.0 / m1 + 1.0 / m0
    b_v = delta * b_c
    level = (1.0 - _SIZE_SLACK) * p
    hi = 12.0 * s + (b_w + b_v) * (math.log(1.0 / level) + 8.0)

    c1, c0 = b_c / m1, b_c / m0  # equal opportunity: the two counts' own scales

    def excess(t: float) -> float:
        # + P(V ≥ t): where the shift exceeds t the normal-sd monotonicity does not apply
        # (docs/proofs/fairclass_cdp_fair.md §10), so that event is charged in full.
        if counts == 1:
            return _tail(t, s, b_w, b_v, 0.5) + 0.5 * math.exp(-t / b_v) - level
        return _tail_two(t, s, b_w, c1, c0) + _two_sf(t, c1, c0) - level

    # Coupling slack: D̃ = (rint(fl(DD̂)·2^k) + Z_w)·2^-k is within 2^-51·nΔ (rounding of
    # DD̂) + 2^-k-1 (rint) + 2^-k (Z_w vs w) of DD̂ + w, and the count noise enters as c·L
    # with c ≤ Δ and |L_discrete − L| ≤ 2^-k_c.
    slack = 1.5 * 2.0**-k + 2.0**-51 * n_cal * delta + delta * 2.0**-k_c
    core = float(optimize.brentq(excess, 1e-12, hi, xtol=1e-10))
    if counts == 1 and rate_bound:
        # The denominator coefficient of the joint bound is x·U with U = 1/lo₁ + 1/lo₀ ≥ Δ
        # (the same weights as the variance, which the Jensen step needs); its count-noise
        # term is then charged at that scale, as the Δ·L⁺ term above.
        core = min(core, _rate_root(core, 1.0 / lo1 + 1.0 / lo0, b_w, b_c, level))
    return core + slack + lattice_shift(lo1, lo0)


#: Cells [x_i, x_{i+1}] of [½, 1] for the joint rate bound (:func:`_rate_root`): public and
#: fixed, finer near ½ where the bound's maximum lies.
RATE_GRID = (0.5, 0.52, 0.54, 0.56, 0.58, 0.6, 0.62, 0.65, 0.68, 0.72, 0.76, 0.8, 0.85,
             0.9, 0.95, 1.0)


def _rate_cell_excess(t: float, x_lo: float, x_hi: float, u: float, b_w: float, b_c: float,
                      level: float) -> float:
    """The cell bound of the joint rate bound at t, minus ``level``: the tail with the
    cell's largest sd (at x_lo, σ² = x(1 − x)·U decreases on [½, 1]) and largest
    denominator coefficient (at x_hi, c = x·U), plus P(c·L⁺ ≥ t) charged in full."""
    s = math.sqrt(x_lo * (1.0 - x_lo) * u)
    b_v = x_hi * u * b_c
    return _tail(t, s, b_w, b_v, 0.5) + 0.5 * math.exp(-t / b_v) - level


def _rate_root(t_max: float, u: float, b_w: float, b_c: float, level: float) -> float:
    """The joint rate bound's margin: the largest root over the cells of :data:`RATE_GRID`,
    capped at ``t_max`` (the worst-case margin, valid anyway).

    With the group rates p_a of the fixed point and U = Σ_a 1/(m̃_a − ℓ), the sampling sd
    and the denominator coefficient are both functions of p; by reflection and Jensen
    (``docs/proofs/fairclass_cdp_fair.md`` §10, "Joint rate bound") they are dominated by
    (sqrt(x(1 − x)U), x·U) for one x ∈ [½, 1], so the failure probability is at most
    max over cells of :func:`_rate_cell_excess` + ``level``. Each cell's excess decreases
    in t, so the margin is the largest cell root; cells with a non-positive excess at a
    candidate root cannot have a larger root and are skipped.
    """
    cells = list(itertools.pairwise(RATE_GRID))

    def ex(i: int, t: float) -> float:
        lo, hi = cells[i]
        return _rate_cell_excess(t, lo, hi, u, b_w, b_c, level)

    at_max = [ex(i, t_max) for i in range(len(cells))]
    if max(at_max) >= 0.0:  # some cell needs t_max or more: the worst-case margin stands
        return t_max
    best = int(np.argmax(at_max))
    root = float(optimize.brentq(lambda t: ex(best, t), 1e-12, t_max, xtol=1e-10))
    for i in range(len(cells)):
        if i != best and ex(i, root) > 0.0:
            root = float(optimize.brentq(lambda t, i=i: ex(i, t), root, t_max, xtol=1e-10))
    return root


def lattice_shift(n1: float, n0: float) -> float:
    """c = ¼(1/n₁ + 1/n₀): the continuity shift added to t for the binomials' atoms.

    N(0, s²) with s² = ¼(1/n₁ + 1/n₀) is only an approximation of the lower tail of
    T₁/n₁ − T₀/n₀ − (p₁ − p₀) (T_a ~ Bin(n_a, p_a)): where the check noise is small next to
    the lattice 1/n_a (large ε_k), an atom at the cut-off makes the exact tail exceed the
    normal one, by up to 12% of β_side at n_a = 100 and 1.4% at n_a = 1500 (measured by
    exact enumeration). A quarter lattice step per group covers it in every case
    enumerated (p_a on a grid of [0.02, 0.98], n_a from 30 to 1500, ε_k up to 10⁴:
    exact tail ≤ 0.96·β_side; ``tests/fairclass/test_certified.py``,
    ``test_margin_dominates_exact_binomial``).
    An enumerated check, not a proof (``docs/proofs/fairclass_cdp_fair.md`` §10).
    """
    return 0.25 * (1.0 / n1 + 1.0 / n0)


def laplace_sum_sf(x: float, b1: float, b2: float) -> float:
    """P(V + W > x) for independent V ~ Laplace(0, b1), W ~ Laplace(0, b2), exactly.

    For x ≥ 0 and b1 ≠ b2 the tail is (b1²e^{−x/b1} − b2²e^{−x/b2}) / (2(b1² − b2²)); for
    b1 = b2 = b it is e^{−x/b}(2b + x)/(4b); for x < 0 it is 1 − P(V + W > −x) (symmetry).
    """
    if x < 0:
        return 1.0 - laplace_sum_sf(-x, b1, b2)
    hi, lo = max(b1, b2), min(b1, b2)
    if hi <= 0:
        return 0.0
    if lo <= 0:
        return 0.5 * math.exp(-x / hi)
    if hi - lo <= 1e-9 * hi:
        return math.exp(-x / hi) * (2.0 * hi + x) / (4.0 * hi)
    r = lo / hi
    # (hi²e^{−x/hi} − lo²e^{−x/lo}) / (2(hi² − lo²)), written stably.
    return (math.exp(-x / hi) - r * r * math.exp(-x / lo)) / (2.0 * (1.0 - r * r))


def aim_scales(
    m1: float, m0: float, *, epsilon_threshold: float, epsilon_check: float,
    n_bound: float | None = None,
) -> tuple[float, float]:
    """(b_v, b_w): the threshold's spread and the check's noise scale, in DD units.

    b_v = 2Δ/ε_e: on a calibration curve that is locally linear around the aim, the
    exponential mechanism (density ∝ exp(−ε_e·L/(2Δ))) puts DD̂(τ̂) − aim at a
    Laplace(2Δ/ε_e) distance (the windowed loss only moves mass to the feasible side).
    b_w = t_w·2^-k ≥ Δ/ε_k: the executed check noise (:func:`check_lattice`).
    Both are functions of the released m̃ and public ε's.
    """
    delta = 1.0 / m1 + 1.0 / m0
    k, t_w = check_lattice(m1, m0, epsilon_check, n_bound)
    return 2.0 * delta / epsilon_threshold, math.ldexp(t_w, -k)


def aim_slack(
    b_v: float, b_w: float, *, aim_fail: float = AIM_FAIL, floor: float = TIE_SLACK
) -> float:
    """g = max(x, floor) with P(V + W > x) = ``aim_fail`` (V ~ Laplace(b_v), W ~ Laplace(b_w)).

    How far below the certified level α − t the threshold aims, so that the check passes
    with probability ≥ 1 − ``aim_fail`` — the aim's own randomness (the mechanism's spread
    b_v) and the check's noise b_w accounted — and never closer than ``floor`` (one step of
    a tied calibration curve), so the aim does not approach α − t as ε grows.
    """
    q = float(aim_fail)
    if not 0.0 < q < 0.5:
        raise InvalidParameterError(f"aim_fail={aim_fail!r}: must be in (0, 0.5).")
    hi = (b_v + b_w) * (math.log(1.0 / q) + 2.0) + 1e-300
    x = float(optimize.brentq(lambda v: laplace_sum_sf(v, b_v, b_w) - q, 0.0, hi, xtol=1e-12))
    return max(x, float(floor))


def pass_probability(
    alpha: float, margin: float, aim: float, b_v: float, b_w: float,
    margin_other: float | None = None,
) -> float:
    """Predicted P(certified) of one fold: P(−(α − t_o) ≤ aim + V + W ≤ α − t) on a
    locally continuous curve, V ~ Laplace(b_v) (threshold spread), W ~ Laplace(b_w) (check
    noise), t = ``margin`` on the aim's side, t_o = ``margin_other`` (default t) on the
    other.

    A prediction (the planner's), not part of any guarantee: the window of the loss makes
    the overshoot side lighter than this Laplace model, ties can make it heavier.
    """
    other = margin if margin_other is None else margin_other
    cap = alpha - margin
    if cap <= 0 or cap + alpha - other <= 0:
        return 0.0
    over = laplace_sum_sf(cap - aim, b_v, b_w)
    under = laplace_sum_sf(alpha - other + aim, b_v, b_w)
    return max(0.0, 1.0 - over - under)


def flat_aim(
    alpha: float,
    margin: float,
    margin_other: float,
    b_v: float,
    b_w: float,
    *,
    extra_margin: float = 0.0,
    floor: float = TIE_SLACK,
    rise: float = AIM_RISE,
    rate: float = PLAN_RATE,
) -> float:
    """The flat-region aim: the largest a ∈ [0, hi], hi = α − t − extra − floor, whose
    predicted pass probability p(a) (:func:`pass_probability`) is ≥ min(p*, max(``rate``,
    1 − ``rise``·(1 − p*))), p* = max p on [0, hi] (p(0) with symmetric margins).

    Why (issue 20, fifth pass): where α − t − g ≤ 0 the ordinary aim
    (:func:`certified_target`) is 0, the aim that maximises the pass probability on a
    symmetric interval. But p(a) = 1 − sf(c − a) − sf(c′ + a) (c = α − t, c′ = α − t_o) is
    flat at a = 0 to first order (its slope there is f(c) − f(c′) = 0 when t = t_o), while
    the fair-Bayes risk R*(a) falls linearly in a: a positive aim buys error at a
    second-order cost in certification. The rule lets the aim at most multiply the best
    predicted failure 1 − p* by ``rise`` (2: add as much again), never below ``rate`` (the
    planner's default target: a calibration share the planner chose because p* reaches it
    still reaches it), and never beyond the slack floor (the aim stays ≥ ``floor`` below
    α − t − extra, as the ordinary one). Where p* < ``rate`` nothing is spent: the aim is
    the maximiser of p (0 with symmetric margins; with κ < ½, t_o > t, p rises first and
    the maximiser is > 0 — measured against p*, not p(0), so the aim never trades pass
    probability below p* for height there). In the ordinary regime (large α, p* ≈ 1) the
    level is above the ordinary aim's ≈ 1 − ``AIM_FAIL`` whenever ``rise``·(1 − p*) <
    ``AIM_FAIL``, so the ordinary aim, the larger, is kept.

    p is log-concave in a (the Laplace sum's density is log-concave, and p is its mass on an
    interval shifted by a), so {p ≥ level} ∩ [0, hi] is an interval containing the
    maximiser; its right end is found by a root search to the right of it (the returned a
    has p(a) ≥ level as computed).

    Public: a function of the released m̃ (through t, t_o, b_v, b_w) and public parameters,
    like the ordinary aim. It changes how often the check passes, never what a pass means:
    the guarantee holds for any τ̂ the check is applied to (``docs/proofs/fairclass_cdp_fair.md``
    §10), and nothing here reads data or spends privacy.
    """
    hi = float(alpha) - float(margin) - float(extra_margin) - float(floor)
    if hi <= 0.0:
        return 0.0

    def pas(a: float) -> float:
        return pass_probability(alpha, margin, a, b_v, b_w, margin_other)

    peak = 0.0
    if margin_other > margin:  # the other side is nearer (κ < ½): p rises first
        res = optimize.minimize_scalar(lambda a: -pas(a), bounds=(0.0, hi), method="bounded",
                                       options={"xatol": 1e-10})
        if -float(res.fun) > pas(0.0):
            peak = float(res.x)
    best = pas(peak)
    level = min(best, max(float(rate), 1.0 - float(rise) * (1.0 - best)))
    if pas(hi) >= level:
        return hi
    root = float(optimize.brentq(lambda a: pas(a) - level, peak, hi, xtol=1e-12))
    step = 1e-12
    while root > peak and pas(root) < level:  # the root's side where p ≥ level, exactly
        root = max(peak, root - step)
        step *= 2.0
    return root


def side_margins(
    m1: float,
    m0: float,
    *,
    epsilon_count: float,
    epsilon_check: float,
    fail_prob: float,
    side_share: float,
    counts: int = 1,
    n_public: float | None = None,
) -> tuple[float, float]:
    """(t, t_o): the margins of τ̂'s side, at β·(1 − κ), and of the other side, at β·κ.

    ``fail_prob`` is the fold's β (both sides), ``side_share`` κ ∈ (0, ½]; κ = ½ gives
    the symmetric margin twice. Validity of the allocation: module docstring and
    ``docs/proofs/fairclass_cdp_fair.md`` §10 (κ must not depend on the calibration half).
    """
    k = float(side_share)
    if not 0.0 < k <= 0.5:
        raise InvalidParameterError(f"side_share={side_share!r}: must lie in (0, 0.5].")
    kw: dict[str, Any] = {"epsilon_count": epsilon_count, "epsilon_check": epsilon_check,
                          "counts": counts, "n_public": n_public}
    main = certification_margin(m1, m0, fail_prob_side=fail_prob * (1.0 - k), **kw)
    if k == 0.5:
        return main, main
    return main, certification_margin(m1, m0, fail_prob_side=fail_prob * k, **kw)


@dataclass(frozen=True)
class SideChoice:
    """The side allocation chosen for one fold (public numbers only).

    Attributes
    ----------
    side_share : float
        κ: the share of β_fold of the side opposite to τ̂.
    margin, margin_other : float
        The margins at the sizes the choice was made with (τ̂'s side, the other side).
    aim : float
        The EM's target there.
    probability : float
        The predicted pass probability (:func:`pass_probability`).
    """

    side_share: float
    margin: float
    margin_other: float
    aim: float
    probability: float


def choose_side_share(
    alpha: float,
    m1: float,
    m0: float,
    *,
    epsilon_count: float,
    epsilon_threshold: float,
    epsilon_check: float,
    fail_prob: float,
    counts: int = 1,
    n_public: float | None = None,
    extra_margin: float = 0.0,
    aim_fail: float = AIM_FAIL,
    floor: float = TIE_SLACK,
    shares: tuple[float, ...] = SIDE_SHARES,
    tolerance: float = SIDE_TOLERANCE,
    flat: bool = True,
) -> SideChoice:
    """κ for one fold: the smallest share in ``shares`` whose predicted pass probability
    (aim on τ̂'s side, :func:`pass_probability`) is within ``tolerance`` of the best.

    A smaller κ lowers τ̂'s side margin (a higher aim, less error) and raises the other
    side's (fails when the interval [−(α − t_o), α − t] gets too narrow, small α): at small
    α the rule returns ½ (symmetric), at large α the smallest share.

    **Privacy and validity.** ``m1, m0`` must be *calibration-independent* sizes: the
    estimator passes π̃_a·n_C (π̃ from S1, released on the training half; n_C public), the
    planner the assumed shares. Then κ is fixed given S1, which the side allocation's
    proof requires; nothing here reads data or spends privacy.
    """
    b_v, b_w = aim_scales(m1, m0, epsilon_threshold=epsilon_threshold,
                          epsilon_check=epsilon_check, n_bound=n_public)
    g = aim_slack(b_v, b_w, aim_fail=aim_fail, floor=floor)
    table = []
    for k in sorted(set(shares)):
        t, t_o = side_margins(m1, m0, epsilon_count=epsilon_count,
                              epsilon_check=epsilon_check, fail_prob=fail_prob,
                              side_share=k, counts=counts, n_public=n_public)
        table.append((k, t, t_o))
    return choose_from_margins(alpha, tuple(table), b_v, b_w, g, extra_margin=extra_margin,
                               tolerance=tolerance, flat=flat, floor=floor)


def choose_from_margins(
    alpha: float,
    table: tuple[tuple[float, float, float], ...],
    b_v: float,
    b_w: float,
    slack: float,
    *,
    extra_margin: float = 0.0,
    tolerance: float = SIDE_TOLERANCE,
    flat: bool = True,
    floor: float = TIE_SLACK,
    rate: float = PLAN_RATE,
) -> SideChoice:
    """:func:`choose_side_share` from precomputed (κ, t, t_o) rows (increasing κ), the
    aim's scales (b_v, b_w) and slack g: the smallest κ whose predicted pass probability
    is within ``tolerance`` of the best (the largest κ when no option reaches
    ``tolerance``). Each option's aim is that of :func:`certified_target` (with ``flat``:
    the larger of α − t − g − extra and :func:`flat_aim`; demographic parity).

    With ``flat`` and a best option at or above ``rate`` the cut is max(best − tolerance,
    ``rate``): the flat-region aims already spent each option's room above the rate, and
    the tolerance must not spend below it again (else a share the planner chose because
    aiming at 0 reaches the rate could fall just below it; measured: the categorical
    design's planned share moved 0.65 → 0.7 at α = 0.05 and its error rose by 0.0012)."""
    options = []
    for k, t, t_o in table:
        aim = max(alpha - t - slack - extra_margin, 0.0)
        if flat:
            aim = max(aim, flat_aim(alpha, t, t_o, b_v, b_w, extra_margin=extra_margin,
                                    floor=floor))
        options.append(SideChoice(k, t, t_o, aim, pass_probability(alpha, t, aim, b_v, b_w,
                                                                   t_o)))
    best = max(o.probability for o in options)
    if best <= tolerance:  # nothing certifies anyway: keep the symmetric rule
        return options[-1]
    cut = best - tolerance
    if flat and best >= rate:
        cut = max(cut, float(rate))
    return next(o for o in options if o.probability >= cut)


def certified_target(
    alpha: float,
    margin: float,
    m1: float,
    m0: float,
    *,
    epsilon_threshold: float,
    epsilon_check: float,
    extra_margin: float = 0.0,
    aim_fail: float = AIM_FAIL,
    floor: float = TIE_SLACK,
    n_bound: float | None = None,
    margin_other: float | None = None,
) -> float:
    """The threshold's target α_t = max(α − t − g − extra, 0), g = :func:`aim_slack`.

    With ``margin_other`` (t_o, the other side's margin; demographic parity) the target is
    the larger of that and :func:`flat_aim` — which differs only where α − t − g is small
    or negative (issue 20, fifth pass). Without it (equal opportunity) the ordinary rule.

    Public (released m̃ and parameters only); the target does not enter the guarantee, only
    how often the check passes.
    """
    b_v, b_w = aim_scales(m1, m0, epsilon_threshold=epsilon_threshold,
                          epsilon_check=epsilon_check, n_bound=n_bound)
    gap = aim_slack(b_v, b_w, aim_fail=aim_fail, floor=floor)
    aim = max(alpha - margin - gap - extra_margin, 0.0)
    if margin_other is not None:
        aim = max(aim, flat_aim(alpha, margin, float(margin_other), b_v, b_w,
                                extra_margin=extra_margin, floor=floor))
    return aim


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
    n_bound: float | None = None,
    margin_other: float | None = None,
    side_share: float = 0.5,
) -> FairnessCertificate:
    """Release D̃ = DD̂(τ̂) + Laplace(Δ/ε_k) (ε_k-DP) and decide the certificate
    −(α − t₋) ≤ D̃ ≤ α − t₊.

    Side allocation: t₊ = ``margin`` if τ̂ ≥ 0 else ``margin_other``, t₋ = ``margin`` if
    τ̂ ≤ 0 else ``margin_other`` (default ``margin_other`` = ``margin``: |D̃| ≤ α − t). The
    side is the sign of the *released* τ̂; why that choice keeps P(|D| > α and certified)
    ≤ β although τ̂ depends on the calibration half: ``docs/proofs/fairclass_cdp_fair.md``
    §10 (the margins must be t(β(1 − κ)) and t(βκ), κ ≤ ½ fixed given S1).

    As executed: (rint(DD̂·2^k) + Z)·2^-k on the public lattice of :func:`check_lattice`,
    Z exact discrete Laplace of integer scale t = ⌈Δ_L/ε_k⌉ (ε_k-DP exactly); the margin t
    includes the 1.5·2^-k by which this differs from DD̂ + Laplace(t·2^-k).

    ``steps`` is the calibration curve with the released denominators (sensitivity
    Δ = 1/m̃₁ + 1/m̃₀ at every τ, so at τ̂ too: τ̂ is itself a DP release, and the check is a
    Laplace mechanism composed after it). ``fail_prob`` is the fold's β (both sides).
    """
    other = float(margin if margin_other is None else margin_other)
    k, units = check_units(m1, m0, epsilon_check, n_bound)
    # The integer statistic S = rint(DD̂·2^k) (exact scaling and rounding) meets exact
    # discrete Laplace noise (check_lattice): no low-order bit of DD̂ reaches the output.
    stat = int(np.rint(steps.at(tau) * 2.0**k))
    released = lattice_laplace(stat, units, epsilon_check, k, rng)
    side = 1 if tau > 0 else (-1 if tau < 0 else 0)
    upper = float(margin) if side >= 0 else other
    lower = float(margin) if side <= 0 else other
    ok = -(alpha - lower) <= released <= alpha - upper
    return FairnessCertificate(
        released_dd=float(released),
        margin=float(margin),
        alpha=float(alpha),
        fail_prob=float(fail_prob),
        certified=bool(ok),
        target=float(target),
        margin_upper=upper,
        margin_lower=lower,
        side=side,
        side_share=float(side_share),
    )


#: What ``fit`` does with a model whose certificate failed.
ON_UNCERTIFIED = ("warn", "raise")


class UncertifiedFairnessError(DPFairError, RuntimeError):
    """``on_uncertified="raise"``: the fit ran (its privacy budget is spent) but its
    certificate failed, so no model is returned.

    Attributes
    ----------
    privacy_spent : Budget
        What the fit spent (charged although nothing is released but this error).
    privacy_ledger : PrivacyLedger
        Its releases, as for a returned model.
    certificates : tuple of FairnessCertificate
        The failed certificates (released numbers: D̃, t, β per fold).
    """

    def __init__(self, message: str, *, privacy_spent: Any, privacy_ledger: Any,
                 certificates: tuple[FairnessCertificate, ...]) -> None:
        super().__init__(message)
        self.privacy_spent = privacy_spent
        self.privacy_ledger = privacy_ledger
        self.certificates = certificates


def check_on_uncertified(value: Any) -> str:
    """Validate ``on_uncertified`` (before any data are read)."""
    if value not in ON_UNCERTIFIED:
        raise InvalidParameterError(
            f"on_uncertified={value!r}: expected 'warn' (return the model, certified_ False, "
            "and warn) or 'raise' (return nothing; the budget is still spent)."
        )
    return str(value)


def refuse_uncertified(
    state: dict[str, Any], on_uncertified: str, message: Callable[[], str]
) -> None:
    """Raise :class:`UncertifiedFairnessError` for a failed certificate when asked to.

    Called on the fitted state *before* the estimator adopts it: with ``"raise"`` nothing
    of the model is kept. The ledger in the error shows the budget the fit spent.
    """
    if on_uncertified == "raise" and state.get("certified_") is False:
        raise UncertifiedFairnessError(
            message() + " on_uncertified='raise': no model is returned; the privacy budget "
            "of this fit is spent (see the error's privacy_ledger).",
            privacy_spent=state.get("privacy_spent_"),
            privacy_ledger=state.get("privacy_ledger_"),
            certificates=tuple(state.get("certificates_") or ()),
        )


def uncertified_message(alpha: float, fail_prob: float, detail: str = "") -> str:
    """The text of :class:`~dpfair.UncertifiedFairnessWarning` (shared with the CLI)."""
    return (
        f"the fitted classifier is NOT certified to keep |DD| <= alpha={alpha:g} with "
        f"probability >= {1 - fail_prob:g}{detail}: too little data or privacy budget for this "
        "alpha. The model is fitted (certified_ is False); use more data, a larger epsilon or "
        "alpha, and do not read alpha as a cap for this model."
    )

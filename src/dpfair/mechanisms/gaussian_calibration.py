r"""Gaussian calibration and (ε, δ) accounting, continuous and discrete (no sampling here).

The arithmetic that turns a budget into a noise scale and a noise scale into a budget:

* the analytic Gaussian mechanism (Balle & Wang 2018): :func:`analytic_gaussian_delta`,
  :func:`analytic_gaussian_sigma`, :func:`continuous_gaussian_privacy_at`;
* the statements of the exact discrete Gaussian
  (:func:`~dpfair.mechanisms.discrete_gaussian.sample_discrete_gaussian`) on a lattice
  (:class:`~dpfair.mechanisms.lattice.LatticeNoise`): its (ε, δ) slack
  (:func:`discrete_gaussian_delta_slack`), the δ at which the continuous part is calibrated
  (:func:`approx_dp_sigma_target`, :data:`DELTA_SLACK_FRACTION`), the check that refuses an
  unproven setup (:func:`check_delta_form`), and the calibration and read-off of a
  d-dimensional release (:func:`discrete_gaussian_sigma`,
  :func:`discrete_gaussian_privacy_at`).

Privacy (used by every release that adds this noise to an integer statistic; here
σ² is the variance *parameter*, the true variance of N_ℤ(0, σ²) is smaller):

* **zCDP.** For integers μ, ν the Rényi divergence of order α > 1 is
  D_α(N_ℤ(μ, σ²) ‖ N_ℤ(ν, σ²)) ≤ α(μ − ν)²/(2σ²): completing the square,
  Σ_y P_μ(y)^α P_ν(y)^{1−α} = e^{α(α−1)(μ−ν)²/(2σ²)} · θ(m)/θ(0) with
  m = αμ + (1 − α)ν and θ(m) = Σ_{y∈ℤ} exp(−(y − m)²/(2σ²)); by Poisson summation
  θ(m) = σ√(2π) Σ_k e^{−2π²σ²k²} cos(2πkm) ≤ θ(0) (CKS 2020, Prop. 5 / Lemma 17). For a
  product of independent N_ℤ(0, σ²) on ℤ^d the divergences add, so adding it to an integer
  vector query with L2 sensitivity Δ is **Δ²/(2σ²)-zCDP**, for any real Δ.
* **(ε, δ).** For the one-dimensional case CKS (Thm. 7) give the tight δ. For vectors we
  use the following bound, proved here (:func:`discrete_gaussian_delta_slack`): let
  σ² = σ_c² + s² with s > 0. Post-process the continuous mechanism y = x + N(0, σ_c² I)
  by drawing K ∈ ℤ^d with P(K = k | y) ∝ exp(−‖k − y‖²/(2s²)) (public randomness, no
  access to x). With η_s = 2Σ_{m≥1} e^{−2π²s²m²}, Poisson summation gives
  Σ_{k∈ℤ} φ_s(k − y) ∈ [1 − η_s, 1 + η_s] for every real y (φ_s the N(0, s²) density),
  hence, coordinatewise and multiplied over d coordinates,
  P(K = k) ∈ [φ_σ(k − x)/(1 + η_s)^d, φ_σ(k − x)/(1 − η_s)^d] (φ_c * φ_s = φ_σ), while the
  discrete Gaussian has P_DG(k) = φ_σ(k − x)/θ_σ^d with θ_σ = Σ_y φ_σ(y) ∈ [1, 1 + η_σ].
  So P_DG ≤ (1 + η_s)^d P_K and P_K ≤ ((1 + η_σ)/(1 − η_s))^d P_DG pointwise. If the
  continuous mechanism with σ_c is (ε, δ_c)-DP (e.g. δ_c from the analytic Gaussian, or
  any point of a μ-GDP curve), then for every event E
  P_DG,x(E) ≤ (1 + η_s)^d (e^ε P_K,x′(E) + δ_c) ≤ e^ε (1 + κ) P_DG,x′(E) + (1 + η_s)^d δ_c,
  1 + κ = ((1 + η_s)(1 + η_σ)/(1 − η_s))^d, i.e. the discrete mechanism is
  (ε, (1 + η_s)^d δ_c + e^ε κ)-DP. Releases here take s = 8 lattice units
  (η_s < 10^{−548}) on top of the calibrated variance, and calibrate δ_c slightly below
  the charged δ so that the sum stays below the charged δ
  (:func:`~dpfair.mechanisms.lattice.approx_dp_variance`).
"""

from __future__ import annotations

import math
from typing import Any

from dpfair._errors import InvalidParameterError
from dpfair._lazy import LazyModule
from dpfair._validation import check_in_open_interval, check_positive
from dpfair.privacy import Budget

optimize: Any = LazyModule("scipy.optimize")  # imported on first use (CLI start-up)
special: Any = LazyModule("scipy.special")  # imported on first use (CLI start-up)

__all__ = [
    "DELTA_SLACK_FRACTION",
    "SMOOTHING_VARIANCE",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "approx_dp_sigma_target",
    "check_delta_form",
    "continuous_gaussian_privacy_at",
    "delta_form_holds",
    "discrete_gaussian_delta_slack",
    "discrete_gaussian_privacy_at",
    "discrete_gaussian_sigma",
]

#: s² (lattice units²) added on top of the calibrated variance of (ε, δ) releases.
SMOOTHING_VARIANCE = 64
#: (ε, δ) releases calibrate the continuous σ_c at δ·(1 − this), leaving room for the slack.
DELTA_SLACK_FRACTION = 2.0**-40


# --------------------------------------------------------------------------- analytic Gaussian
def analytic_gaussian_delta(sigma: float, l2_sensitivity: float, epsilon: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8).

    N(0, σ²) noise on a query of L2 sensitivity Δ is (ε, δ)-DP if and only if
    δ ≥ Φ(Δ/(2σ) − εσ/Δ) − e^ε · Φ(−Δ/(2σ) − εσ/Δ). Evaluated with ``log_ndtr`` so
    that large ε or tiny δ neither overflow nor cancel to 0.
    """
    s = check_positive("sigma", sigma)
    d = check_positive("l2_sensitivity", l2_sensitivity)
    e = float(epsilon)
    if e < 0:
        raise InvalidParameterError(f"epsilon={epsilon!r}: must be >= 0.")
    a, b = d / (2 * s), e * s / d
    log_first = special.log_ndtr(a - b)
    log_second = e + special.log_ndtr(-a - b)
    if log_second >= log_first:
        return 0.0
    return float(math.exp(log_first) * -math.expm1(log_second - log_first))


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest σ for which N(0, σ²) noise is (ε, δ)-DP (analytic Gaussian mechanism).

    Solves ``analytic_gaussian_delta(σ) = δ`` by Brent's method on log σ (δ(σ) is
    strictly decreasing). Valid for every ε > 0, unlike the classical
    σ = Δ·sqrt(2 ln(1.25/δ))/ε which needs ε < 1.
    """
    e = check_positive("epsilon", epsilon)
    dl = check_in_open_interval("delta", delta, 0.0, 1.0)
    sens = check_positive("l2_sensitivity", l2_sensitivity)

    def gap(log_sigma: float) -> float:
        return analytic_gaussian_delta(math.exp(log_sigma), sens, e) - dl

    lo, hi = math.log(sens) - 10.0, math.log(sens) + 10.0
    while gap(lo) < 0:
        lo -= 10.0
    while gap(hi) > 0:
        hi += 10.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    sigma = math.exp(root)
    # Step up to the first float where the guarantee certainly holds.
    while analytic_gaussian_delta(sigma, sens, e) > dl:
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-12)
    return sigma


def continuous_gaussian_privacy_at(sigma: float, l2_sensitivity: float, delta: float) -> Budget:
    """(ε, δ) of the *continuous* mechanism N(f(D), σ²) (analytic Gaussian, smallest ε).

    The building block of the discrete statements
    (:meth:`~dpfair.mechanisms.gaussian.GaussianMechanism.privacy_at`,
    :func:`discrete_gaussian_privacy_at`).
    """
    check_positive("sigma", sigma)
    check_positive("l2_sensitivity", l2_sensitivity)
    dl = check_in_open_interval("delta", delta, 0.0, 1.0)

    def gap(eps: float) -> float:
        return analytic_gaussian_delta(sigma, l2_sensitivity, eps) - dl

    if gap(0.0) <= 0:
        return Budget.approx(0.0, dl)
    hi = 1.0
    while gap(hi) > 0:
        hi *= 2.0
    eps = optimize.brentq(gap, 0.0, hi, xtol=1e-13, rtol=1e-13)
    return Budget.approx(float(eps) * (1 + 1e-12), dl, note="analytic Gaussian")


# --------------------------------------------------------------------------- (ε, δ) slack
def discrete_gaussian_delta_slack(
    epsilon: float, dim: int, smoothing: int = SMOOTHING_VARIANCE
) -> float:
    """log of an upper bound on the additive δ slack of the discrete Gaussian (module docstring).

    With s² = ``smoothing`` (lattice units²) subtracted from the variance parameter to
    form the continuous σ_c² = σ² − s², the d-dimensional discrete Gaussian mechanism is
    (ε, δ_c + ξ)-DP whenever the continuous one with σ_c is (ε, δ_c)-DP, where
    ξ = ((1 + η_s)^d − 1)δ_c + e^ε κ ≤ (2 + 8e^ε)·d·η_s as long as d·η_s ≤ 1/8
    (using η_σ ≤ η_s for σ ≥ s, log(1 + x) ≤ x, 1/(1 − η) ≤ 1 + 2η and e^y − 1 ≤ 2y for
    y ≤ 1/2), and η_s = 2Σ_{m≥1} e^{−2π²s²m²} ≤ 2e^{−2π²s²}/(1 − e^{−6π²s²}).
    Returns log((2 + 8e^ε)·d·η_s) (an upper bound, rounded up by 10^-9 relative);
    at s² = 64 this is about log(d) + ε − 1258.
    """
    e = max(float(epsilon), 0.0)
    s2 = int(smoothing)
    if s2 < 1 or int(dim) < 1:
        raise InvalidParameterError("smoothing and dim must be positive integers.")
    log_eta = math.log(2.0) - 2.0 * math.pi**2 * s2 - math.log1p(-math.exp(-6.0 * math.pi**2 * s2))
    if math.log(int(dim)) + log_eta > math.log(1 / 8):
        raise InvalidParameterError("smoothing variance too small for this dimension.")
    log_front = e + math.log(8.0 + 2.0 * math.exp(-e))
    out = log_front + math.log(int(dim)) + log_eta
    return out + 1e-9 * abs(out)


def approx_dp_sigma_target(epsilon: float, delta: float, dim: int) -> float:
    """The δ_c at which to calibrate (or read ε off) the continuous σ_c for a charged (ε, δ).

    δ_c = δ·(1 − 2^-40). Two forms of the bound of the module docstring apply, with
    d = ``dim`` noise values and s² = :data:`SMOOTHING_VARIANCE` lattice units² in the
    variance:

    * δ-form: (ε, δ_c + ξ)-DP with ξ ≤ (2 + 8e^ε)·d·η_s; when ξ ≤ δ·2^-41 (checked here
      by :func:`check_delta_form` for ε > 0; callers that read ε off afterwards check
      it then) the charged (ε, δ) holds exactly. It holds for d ≤ 2^40 whenever
      ε ≤ ~1200 + ln δ; beyond, the setup is refused rather than charged a statement
      that is not proven (attack review of issue 11);
    * ε-form, always: (ε + ln(1 + κ), (1 + η_s)^d δ_c)-DP with ln(1 + κ) ≤ 4dη_s < 10^-500
      and (1 + η_s)^d δ_c < δ.
    """
    d = float(delta)
    if not 0 < d < 1:
        raise InvalidParameterError(f"delta={delta!r}: expected 0 < delta < 1.")
    if float(epsilon) > 0:
        check_delta_form(epsilon, d, dim)
    return d * (1.0 - DELTA_SLACK_FRACTION)


def check_delta_form(epsilon: float, delta: float, dim: int) -> None:
    """Refuse an (ε, δ) whose discrete-Gaussian δ slack is not provably inside δ·2^-41."""
    if not delta_form_holds(epsilon, delta, dim):
        raise InvalidParameterError(
            f"epsilon={float(epsilon):g} with delta={float(delta):g}: beyond the region where "
            "the exact discrete Gaussian's (epsilon, delta) statement is proven "
            "(epsilon <= ~1200 + ln(delta) - ln(16 * noise values)); use a larger delta "
            "or a smaller epsilon."
        )


def delta_form_holds(epsilon: float, delta: float, dim: int) -> bool:
    """Whether the discrete Gaussian's δ slack ξ fits in δ·2^-41 (δ-form of the bound)."""
    limit = math.log(float(delta)) - 41 * math.log(2.0)
    return discrete_gaussian_delta_slack(epsilon, dim) <= limit


# --------------------------------------------------------------------------- d-dim. releases
def discrete_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float, dim: int) -> float:
    """Nominal σ of a d-dimensional lattice discrete Gaussian release that is (ε, δ)-DP.

    The analytic-Gaussian σ at δ_c = :func:`approx_dp_sigma_target` (δ·(1 − 2^-40)); used
    with :class:`~dpfair.mechanisms.lattice.LatticeNoise` (variance S ≥ σ²4^b + s²), the
    release is (ε, δ_c + slack)-DP with slack ≤ δ·2^-41 (module docstring), so (ε, δ) holds.
    """
    return analytic_gaussian_sigma(
        epsilon, approx_dp_sigma_target(epsilon, delta, dim), l2_sensitivity
    )


def discrete_gaussian_privacy_at(
    sigma: float, l2_sensitivity: float, delta: float, dim: int
) -> Budget:
    """(ε, δ) of a d-dimensional lattice release of nominal σ (true bound).

    The release is :class:`~dpfair.mechanisms.lattice.LatticeNoise` noise on d values.

    ε is the analytic-Gaussian ε of the continuous mechanism with σ at δ_c = δ(1 − 2^-40);
    by :func:`approx_dp_sigma_target` the returned (ε, δ) holds for the executed discrete
    mechanism (exactly where :func:`delta_form_holds`, else up to < 10^-500 in ε).
    """
    d = float(delta)
    if not 0 < d < 1:
        raise InvalidParameterError(f"delta={delta!r}: expected 0 < delta < 1.")
    cont = continuous_gaussian_privacy_at(
        sigma, l2_sensitivity, d * (1.0 - DELTA_SLACK_FRACTION))
    eps = float(cont.epsilon or 0.0)
    check_delta_form(eps, d, dim)
    return Budget.approx(eps, d, note="discrete Gaussian (analytic Gaussian + lattice slack)")

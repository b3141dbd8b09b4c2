"""The Gaussian mechanism, calibrated either in zCDP or exactly in (ε, δ)-DP."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_in_open_interval, check_positive
from dpfair.privacy import Budget

if TYPE_CHECKING:
    from dpfair.mechanisms.discrete_gaussian import LatticeNoise

__all__ = [
    "GaussianMechanism",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "lattice_bits",
    "snap_to_lattice",
]

#: Finest lattice used for released Gaussian noise: multiples of 2^-40.
_MAX_LATTICE_BITS = 40


def lattice_bits(magnitude: float) -> int:
    """Bits k of the public lattice 2^-k·Z for values of absolute size up to ``magnitude``.

    The largest k ≤ 40 with (magnitude + 1)·2^{k+1} ≤ 2^53: any two numbers on the lattice
    whose sum stays below twice that size add *exactly* in binary64. ``magnitude`` must be
    public (a public n, a public bound, or a data-free multiple of the noise scale).
    """
    m = max(float(magnitude), 0.0) + 1.0
    if not math.isfinite(m):
        raise InvalidParameterError(f"magnitude={magnitude!r}: must be finite.")
    k = 52 - math.ceil(math.log2(m))
    return int(min(max(k, 0), _MAX_LATTICE_BITS))


def snap_to_lattice(values: ArrayLike, bits: int) -> NDArray[np.float64]:
    """Round to the nearest multiple of 2^-bits: rint(v·2^k)/2^k, every step exact.

    Scaling by a power of two and ``rint`` are exact in binary64 (no overflow for the
    magnitudes :func:`lattice_bits` allows), so the result is a deterministic function of
    ``values`` on a public lattice.

    Floating-point model (``docs/floating_point.md``): used to put a computed statistic
    (the GP's whitened z) or a binary64 Laplace draw on the public lattice before it meets
    the noise or the data; the sum of two lattice values is then exact. Gaussian noise is
    no longer drawn in binary64 and snapped: releases use the exact discrete Gaussian
    (:mod:`dpfair.mechanisms.discrete_gaussian`).
    """
    scale = float(2.0 ** int(bits))
    return np.asarray(np.rint(np.asarray(values, dtype=np.float64) * scale) / scale)


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


@dataclass(frozen=True, slots=True)
class GaussianMechanism:
    """Add N(0, σ²) noise to a query of L2 sensitivity ``l2_sensitivity``.

    Parameters
    ----------
    sigma : float
        Noise standard deviation.
    l2_sensitivity : float
        Largest L2 change of the query between neighbouring data sets (replace-one).

    Notes
    -----
    Privacy: ρ-zCDP with ρ = Δ²/(2σ²) (Bun & Steinke 2016, Prop. 1.6): the Rényi
    divergence of order a between N(μ, σ²) and N(μ', σ²) is a·|μ−μ'|²/(2σ²) ≤ a·Δ²/(2σ²).
    It is also (ε, δ)-DP for every ε with δ = :func:`analytic_gaussian_delta`
    (Balle & Wang 2018). Build it from a budget with :meth:`for_zcdp` or
    :meth:`for_approx`.
    """

    sigma: float
    l2_sensitivity: float = 1.0

    def __post_init__(self) -> None:
        check_positive("sigma", self.sigma)
        check_positive("l2_sensitivity", self.l2_sensitivity)

    @classmethod
    def for_zcdp(cls, rho: float, l2_sensitivity: float = 1.0) -> GaussianMechanism:
        """σ = Δ / sqrt(2ρ), so that Δ²/(2σ²) = ρ."""
        r = check_positive("rho", rho)
        sens = check_positive("l2_sensitivity", l2_sensitivity)
        return cls(sigma=sens / math.sqrt(2.0 * r), l2_sensitivity=sens)

    @classmethod
    def for_approx(
        cls, epsilon: float, delta: float, l2_sensitivity: float = 1.0
    ) -> GaussianMechanism:
        """Smallest σ that is (ε, δ)-DP, by the analytic Gaussian mechanism."""
        return cls(
            sigma=analytic_gaussian_sigma(epsilon, delta, l2_sensitivity),
            l2_sensitivity=float(l2_sensitivity),
        )

    @property
    def privacy(self) -> Budget:
        """The zCDP guarantee, ρ = Δ²/(2σ²)."""
        return Budget.zcdp(self.l2_sensitivity**2 / (2.0 * self.sigma**2))

    def continuous_privacy_at(self, delta: float) -> Budget:
        """(ε, δ) of the *continuous* mechanism N(f(D), σ²) (analytic Gaussian, smallest ε).

        The building block of the discrete statements (:meth:`privacy_at`,
        :func:`~dpfair.mechanisms.discrete_gaussian.discrete_gaussian_privacy_at`).
        """
        dl = check_in_open_interval("delta", delta, 0.0, 1.0)

        def gap(eps: float) -> float:
            return analytic_gaussian_delta(self.sigma, self.l2_sensitivity, eps) - dl

        if gap(0.0) <= 0:
            return Budget.approx(0.0, dl)
        hi = 1.0
        while gap(hi) > 0:
            hi *= 2.0
        eps = optimize.brentq(gap, 0.0, hi, xtol=1e-13, rtol=1e-13)
        return Budget.approx(float(eps) * (1 + 1e-12), dl, note="analytic Gaussian")

    def privacy_at(self, delta: float) -> Budget:
        """The (ε, δ) guarantee of :meth:`release` as executed, at this δ.

        :meth:`release` adds exact discrete Gaussian noise on a lattice whose continuous
        part has scale ≥ σ for the lattice sensitivity (:meth:`lattice_noise`), so the
        analytic-Gaussian ε read at δ(1 − 2^-40) holds for the executed release (the
        discrete slack ≤ δ·2^-41, ``mechanisms/discrete_gaussian.py``).
        """
        from dpfair.mechanisms.discrete_gaussian import DELTA_SLACK_FRACTION, check_delta_form

        dl = check_in_open_interval("delta", delta, 0.0, 1.0)
        cont = self.continuous_privacy_at(dl * (1.0 - DELTA_SLACK_FRACTION))
        check_delta_form(float(cont.epsilon or 0.0), dl, 2**40)
        return Budget.approx(float(cont.epsilon or 0.0), dl,
                             note="discrete Gaussian on a lattice (analytic + slack)")

    def lattice_noise(self, dim: int = 1) -> LatticeNoise:
        """The public lattice 2^-b·ℤ and exact noise of :meth:`release` for ``dim`` values.

        b = clip(20 − ⌊log2 min(σ, Δ)⌋, 0, 44 − ⌈log2 σ⌉): public. Snapping moves each
        coordinate by ≤ 2^-b/2, so neighbours' snapped vectors differ by
        ≤ Δ·2^b + √dim lattice units = 2^b·Δ·(σ′/σ) with σ′ = σ(1 + √dim·2^-b/Δ); the
        noise is N_ℤ(0, S)^dim with S·4^-b ≥ σ′² (+ the smoothing term of
        :class:`~dpfair.mechanisms.discrete_gaussian.LatticeNoise`), so the zCDP ρ of the
        integer mechanism is ≤ (2^bΔσ′/σ)²/(2σ′²4^b) = Δ²/(2σ²) exactly as stated by
        :attr:`privacy`. The extra noise σ′/σ − 1 = √dim·2^-b/Δ is ≤ √dim·2^-20 unless
        σ/Δ > 2^24 (where the cap on b keeps the sampler's integers below 2^45).
        """
        from dpfair.mechanisms.discrete_gaussian import (
            SMOOTHING_VARIANCE,
            LatticeNoise,
            _round_to_scale,
            lattice_variance,
        )

        d = int(dim)
        if d < 1:
            raise InvalidParameterError(f"dim={dim!r}: expected a positive number of values.")
        low = math.floor(math.log2(min(self.sigma, self.l2_sensitivity)))
        cap = 44 - math.ceil(math.log2(self.sigma))
        b = int(min(max(20 - low, 0), max(cap, 0)))
        sig = self.sigma * (1.0 + math.sqrt(d) * 2.0**-b / self.l2_sensitivity) * (1 + 2**-50)
        variance = _round_to_scale(lattice_variance(sig, b, SMOOTHING_VARIANCE))
        return LatticeNoise(float(sig), b, variance)

    @property
    def variance(self) -> float:
        """Variance of the added noise."""
        return self.sigma**2

    def release(self, value: ArrayLike, rng: RandomLike = None) -> NDArray[np.float64]:
        """``value`` plus Gaussian noise, ρ-zCDP as executed (Mironov's fix, done exactly).

        ``value`` is snapped to the public lattice 2^-b·ℤ of :meth:`lattice_noise`
        (K = rint(value·2^b), exact: scaling by a power of two and ``rint`` are exact), an
        exact discrete Gaussian vector Z (``sample_discrete_gaussian``, integer arithmetic
        only) is added in int64, and (K + Z)·2^-b is converted to
        binary64 — a function of the private integer vector K + Z, i.e. post-processing.
        Values beyond ±2^61 steps (±2^61·2^-b) are clamped to that public range first.
        The output depends on ``value`` only through K, never through its low-order bits;
        the noise is larger than σ by a relative √dim·2^-b/Δ (:meth:`lattice_noise`).
        """
        gen = as_generator(rng)
        arr = np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise InvalidParameterError("value: must be finite.")
        noise = self.lattice_noise(max(arr.size, 1))
        # Clamped to the public range ±2^61 lattice steps first (a 1-Lipschitz map of each
        # value, so the sensitivity is unchanged): no data-dependent refusal, and K + Z
        # stays in int64.
        limit = 2.0**61
        with np.errstate(over="ignore"):
            scaled = np.clip(arr * 2.0**noise.bits, -limit, limit)
        from dpfair.mechanisms.discrete_gaussian import sample_discrete_gaussian

        k = np.rint(scaled).astype(np.int64)  # |k| ≤ 2^61: exact in int64
        z = sample_discrete_gaussian(noise.variance, arr.shape, gen)
        return np.asarray((k + z).astype(np.float64) * noise.step, dtype=np.float64)

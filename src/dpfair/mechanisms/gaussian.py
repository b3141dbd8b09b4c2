"""The Gaussian mechanism on a query's value, ρ-zCDP or (ε, δ)-DP as executed.

:class:`GaussianMechanism` is the generic release: calibrate σ from a budget
(:mod:`~dpfair.mechanisms.gaussian_calibration`), snap the value to a public lattice and add
exact discrete Gaussian noise (:mod:`~dpfair.mechanisms.lattice`,
:mod:`~dpfair.mechanisms.discrete_gaussian`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_in_open_interval, check_positive
from dpfair.mechanisms.discrete_gaussian import round_to_scale, sample_discrete_gaussian
from dpfair.mechanisms.gaussian_calibration import (
    DELTA_SLACK_FRACTION,
    SMOOTHING_VARIANCE,
    analytic_gaussian_sigma,
    check_delta_form,
    continuous_gaussian_privacy_at,
)
from dpfair.mechanisms.lattice import LatticeNoise, lattice_variance
from dpfair.privacy import Budget

__all__ = ["GaussianMechanism"]


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

        :func:`~dpfair.mechanisms.gaussian_calibration.continuous_gaussian_privacy_at`;
        the building block of :meth:`privacy_at`.
        """
        return continuous_gaussian_privacy_at(self.sigma, self.l2_sensitivity, delta)

    def privacy_at(self, delta: float) -> Budget:
        """The (ε, δ) guarantee of :meth:`release` as executed, at this δ.

        :meth:`release` adds exact discrete Gaussian noise on a lattice whose continuous
        part has scale ≥ σ for the lattice sensitivity (:meth:`lattice_noise`), so the
        analytic-Gaussian ε read at δ(1 − 2^-40) holds for the executed release (the
        discrete slack ≤ δ·2^-41, :mod:`~dpfair.mechanisms.gaussian_calibration`).
        """
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
        :class:`~dpfair.mechanisms.lattice.LatticeNoise`), so the zCDP ρ of the
        integer mechanism is ≤ (2^bΔσ′/σ)²/(2σ′²4^b) = Δ²/(2σ²) exactly as stated by
        :attr:`privacy`. The extra noise σ′/σ − 1 = √dim·2^-b/Δ is ≤ √dim·2^-20 unless
        σ/Δ > 2^24 (where the cap on b keeps the sampler's integers below 2^45).
        """
        d = int(dim)
        if d < 1:
            raise InvalidParameterError(f"dim={dim!r}: expected a positive number of values.")
        low = math.floor(math.log2(min(self.sigma, self.l2_sensitivity)))
        cap = 44 - math.ceil(math.log2(self.sigma))
        b = int(min(max(20 - low, 0), max(cap, 0)))
        sig = self.sigma * (1.0 + math.sqrt(d) * 2.0**-b / self.l2_sensitivity) * (1 + 2**-50)
        variance = round_to_scale(lattice_variance(sig, b, SMOOTHING_VARIANCE))
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
        k = np.rint(scaled).astype(np.int64)  # |k| ≤ 2^61: exact in int64
        z = sample_discrete_gaussian(noise.variance, arr.shape, gen)
        return np.asarray((k + z).astype(np.float64) * noise.step, dtype=np.float64)

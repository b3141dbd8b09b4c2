r"""Lattice noise: exact discrete Gaussian noise on a public lattice 2^-bits·ℤ, in real units.

A released statistic and its noise both live on a public lattice, so that their sum is an
exact binary64 number and the mechanism is an integer mechanism in lattice units (Mironov's
fix, done exactly; ``docs/floating_point.md``):

* the lattice: :func:`lattice_bits` (the finest lattice on which two values of a public
  magnitude add exactly), :func:`snap_to_lattice`, :func:`gaussian_noise_bits`;
* the variance in lattice units: :func:`lattice_variance`, :func:`approx_dp_variance`;
* the noise object :class:`LatticeNoise` (nominal σ, lattice, variance; exact draws by
  :func:`~dpfair.mechanisms.discrete_gaussian.sample_discrete_gaussian`, and tail bounds
  for intervals built on it).

Privacy: noise N_ℤ(0, S) added to an integer statistic of L2 sensitivity Δ_lat (lattice
units) is Δ_lat²/(2S)-zCDP; the (ε, δ) statements and the smoothing term s² are in
:mod:`dpfair.mechanisms.gaussian_calibration`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._lazy import LazyModule
from dpfair._rng import RandomLike
from dpfair.mechanisms.discrete_gaussian import round_to_scale, sample_discrete_gaussian
from dpfair.mechanisms.gaussian_calibration import SMOOTHING_VARIANCE

special: Any = LazyModule("scipy.special")  # imported on first use (CLI start-up)

__all__ = [
    "LatticeNoise",
    "approx_dp_variance",
    "gaussian_noise_bits",
    "lattice_bits",
    "lattice_variance",
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


def lattice_variance(sigma: float, bits: int, extra: int = 0) -> int:
    """S = ⌈σ²·4^bits⌉ + ``extra``: the variance parameter in units of 2^-bits.

    σ is read as the exact rational value of its binary64, so S·4^-bits ≥ σ² exactly and
    the relative overshoot of the variance is (S − σ²4^bits)/(σ²4^bits)
    ≤ (1 + extra)/(S − 1 − extra) (≈ 1/S for extra = 0).
    """
    s = Fraction(float(sigma))
    if not s > 0:
        raise InvalidParameterError(f"sigma={sigma!r}: must be > 0.")
    return math.ceil(s * s * 4 ** int(bits)) + int(extra)


def gaussian_noise_bits(sigma: float, magnitude: float, scale_bits: int = 12) -> int:
    """Public lattice bits b for discrete Gaussian noise σ on a statistic of size ``magnitude``.

    The smallest b ≥ 0 with σ·2^b ≥ 2^scale_bits (default 12: the discrete Gaussian on
    2^-b·ℤ is then indistinguishable from the continuous one at the accuracy of any
    release, and the sampler's integers stay in int64 up to scale_bits = 26), capped by
    :func:`lattice_bits` so that statistic + noise is an exact
    binary64 sum. σ and ``magnitude`` must be public.
    """
    s = float(sigma)
    if not (math.isfinite(s) and s > 0):
        raise InvalidParameterError(f"sigma={sigma!r}: must be finite and > 0.")
    want = max(0, int(scale_bits) - math.floor(math.log2(s)))
    return int(min(want, lattice_bits(magnitude)))


def approx_dp_variance(sigma_c: float, bits: int) -> int:
    """Lattice variance S = ⌈σ_c²4^bits⌉ + s² of an (ε, δ) release calibrated at σ_c."""
    return lattice_variance(sigma_c, bits, SMOOTHING_VARIANCE)


#: r² (lattice units²) of the Gaussian smoothing in :meth:`LatticeNoise.combination_bound`.
_TAIL_SMOOTHING = 4
#: The smoothing Gaussian is bounded at this many of its standard deviations.
_TAIL_SHIFT_SDS = 8.0


@dataclass(frozen=True, slots=True)
class LatticeNoise:
    r"""Exact discrete Gaussian noise of nominal scale σ on the public lattice 2^-bits·ℤ.

    In lattice units the noise is N_ℤ(0, S), S = ``variance`` = ⌈σ²4^bits⌉ + s²
    (s² = :data:`SMOOTHING_VARIANCE`) rounded up to a multiple of the sampler's Laplace
    scale t ≈ √S (relative overshoot < (65 + 2√S)/S; this keeps the sampler's integers in
    int64), so that both the zCDP statement (variance parameter
    S·4^-bits ≥ σ²) and the (ε, δ) statement (continuous part σ_c² = (S − s²)4^-bits ≥ σ²)
    of the module docstring hold for the nominal σ. Build it with :meth:`for_sigma` from
    public numbers only.

    Tails (used by the median intervals, whose coverage proofs assumed N(0, σ²) noise):

    * one coordinate: P(Z ≥ t) ≤ Φ̄((t − 2^-bits)/σ_S) for lattice points t > 0,
      σ_S = √S·2^-bits (:attr:`scale`): Σ_{j≥m} e^{−j²/2S} ≤ ∫_{m−1}^∞ e^{−x²/2S}dx and the
      normaliser is ≥ √(2πS) (Poisson summation);
    * a linear combination T = Σ a_i Z_i of d independent draws: :meth:`combination_bound`.
    """

    sigma: float
    bits: int
    variance: int

    @classmethod
    @functools.lru_cache(maxsize=256)
    def for_sigma(cls, sigma: float, magnitude: float, scale_bits: int = 12) -> LatticeNoise:
        """Noise for nominal σ added to statistics of absolute size ≤ ``magnitude`` (public).

        ``scale_bits``: the lattice is the coarsest with σ·2^bits ≥ 2^scale_bits (capped so
        that statistic + noise stays exact; :func:`gaussian_noise_bits`). Cached: a pure
        function of public numbers returning an immutable object.
        """
        bits = gaussian_noise_bits(sigma, magnitude, scale_bits)
        s0 = lattice_variance(sigma, bits, SMOOTHING_VARIANCE)
        return cls(float(sigma), bits, round_to_scale(s0))

    @property
    def scale(self) -> float:
        """σ_S = √S·2^-bits ≥ σ: the variance parameter's square root in real units."""
        return math.sqrt(self.variance) * 2.0**-self.bits

    @property
    def step(self) -> float:
        """2^-bits, the lattice spacing."""
        return 2.0**-self.bits

    def sample(self, size: int | tuple[int, ...], rng: RandomLike = None) -> NDArray[np.float64]:
        """Exact draws Z·2^-bits, Z ~ N_ℤ(0, S) (see :func:`sample_discrete_gaussian`)."""
        z = sample_discrete_gaussian(self.variance, size, rng)
        if z.size and int(np.abs(z).max()) >= 2**53:
            raise OverflowError("discrete Gaussian draw beyond 2^53 lattice units.")
        return np.asarray(z.astype(np.float64) * self.step, dtype=np.float64)

    def combination_bound(
        self, std: ArrayLike, dim: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        r"""(σ⁺, w, f) with P(T ≥ u) ≤ f·Φ̄((u − w)/σ⁺) for every real u.

        T = Σ a_i Z_i over at most ``dim`` independent draws of this noise, given by its
        *nominal* standard deviation std = σ‖a‖₂ (what the Gaussian analysis would use).
        Proof (lattice units, ‖a‖ = std/σ): add independent N_i ~ N(0, r²), r² = 4. The
        density of Z_i + N_i is Σ_k P(Z_i = k) φ_r(x − k) = φ_{S+r²}(x)·Σ_k φ_v(k − m)/θ_S
        with v = Sr²/(S + r²), m = xS/(S + r²) (product of two Gaussian densities), and by
        Poisson summation Σ_k φ_v(k − m) ≤ 1 + η_v, θ_S ≥ 1, η_v = 2Σ_{ℓ≥1} e^{−2π²vℓ²}. So
        T′ = Σ a_i(Z_i + N_i) satisfies P(T′ ≥ u′) ≤ (1 + η_v)^d Φ̄(u′/(‖a‖√(S + r²))).
        T′ = T + G with G ~ N(0, r²‖a‖²) independent of T, hence
        P(T ≥ u) ≤ P(T′ ≥ u − w)/P(G ≥ −w), w = 8r‖a‖, P(G ≥ −w) = 1 − Φ̄(8).
        In real units σ⁺ = ‖a‖√(S + r²)·2^-bits, w = 8r‖a‖·2^-bits,
        f = (1 + η_v)^d/(1 − Φ̄(8)) (rounded up). With σ·2^bits ≥ 2^12 the shift is
        w ≤ 0.4 % of std and σ⁺/std − 1 ≤ 1/√S + 40/S ≤ 2.5·10^-4 (S rounded up to a
        multiple of t ≈ √S; 1e-4 at the median trees).
        """
        sd = np.asarray(std, dtype=np.float64)
        norm = sd / self.sigma  # ‖a‖₂
        r2 = _TAIL_SMOOTHING
        v = self.variance * r2 / (self.variance + r2)
        eta = 2.0 * math.exp(-2.0 * math.pi**2 * v) / (1.0 - math.exp(-6.0 * math.pi**2 * v))
        log_f = int(dim) * math.log1p(eta) - math.log1p(-float(special.ndtr(-_TAIL_SHIFT_SDS)))
        factor = math.exp(log_f) * (1.0 + 1e-12)
        sig_plus = norm * math.sqrt(self.variance + r2) * self.step
        shift = norm * _TAIL_SHIFT_SDS * math.sqrt(r2) * self.step
        return sig_plus, shift, factor

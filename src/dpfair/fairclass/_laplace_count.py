"""The CDP-Fair Laplace count m̃₁ (group-1 calibration count): exact discrete Laplace.

Floating-point model (``docs/floating_point.md``): the count c is an integer; on the public
lattice 2^-k·ℤ (k from the public calibration size) it is the integer c·2^k, whose
sensitivity is 2^k lattice units. The release is (c·2^k + Z)·2^-k with Z exact discrete
Laplace of scale t = ⌈2^k/ε_c⌉ (:func:`~dpfair.mechanisms.discrete_laplace.lattice_laplace`):
ε_c-DP exactly as executed (pmf ratio ≤ exp(2^k/t) ≤ e^{ε_c}), no floating-point step
before the integer release. The noise Z·2^-k is within 2^-k of a continuous
Laplace(t·2^-k), t·2^-k ∈ [1/ε_c, 1/ε_c + 2^-k): the certificate's margin uses that
coupling (:func:`~dpfair.fairclass._certify.certification_margin`).

The in-memory and the out-of-core fits both call :func:`noisy_count` at the same point of
their draw sequence, so the same seed gives the same m̃₁.
"""

from __future__ import annotations

import numpy as np

from dpfair._errors import InvalidParameterError
from dpfair.mechanisms import (
    LAPLACE_SAFE_SCALE as SAFE_SCALE,
)
from dpfair.mechanisms import (
    discrete_laplace_scale,
    lattice_bits,
    lattice_laplace,
)

__all__ = ["count_lattice", "noisy_count"]


def count_lattice(n_public: int, epsilon: float) -> tuple[int, int]:
    """(k, t): the lattice bits and the integer noise scale ⌈2^k/ε⌉ of the count.

    k = ``lattice_bits(2 n + 10^6)`` (the lattice of the former snapped noise), lowered
    while t would exceed the sampler's uncapped limit 2^33 (``SAFE_SCALE``: beyond it the
    int64 guard could clip the noise). Public: n and ε only.
    """
    if not epsilon > 0:
        raise InvalidParameterError(f"epsilon_count={epsilon!r}: must be > 0.")
    k = lattice_bits(2.0 * float(n_public) + 1e6)
    while k > 0 and discrete_laplace_scale(2**k, epsilon) > SAFE_SCALE:
        k -= 1
    t = discrete_laplace_scale(2**k, epsilon)
    if t > SAFE_SCALE:
        raise InvalidParameterError(
            f"epsilon_count={epsilon!r}: too small for the exact count noise (need >= 2^-33)."
        )
    return k, t


def noisy_count(count: int, n_public: int, epsilon: float, rng: np.random.Generator) -> float:
    """c + Z·2^-k: the count with exact discrete Laplace noise of scale ≈ 1/ε (sensitivity 1)."""
    k, _ = count_lattice(n_public, epsilon)
    return lattice_laplace(int(count) << k, 2**k, epsilon, k, rng)

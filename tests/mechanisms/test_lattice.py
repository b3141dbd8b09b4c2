"""Lattice noise (:mod:`dpfair.mechanisms.lattice`): lattice bits, variance, exact draws."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfair import InvalidParameterError
from dpfair.mechanisms.discrete_gaussian import sample_discrete_gaussian
from dpfair.mechanisms.lattice import LatticeNoise, gaussian_noise_bits, lattice_variance


def test_lattice_noise_and_parameters():
    sigma = 3.0
    bits = gaussian_noise_bits(sigma, 1e6)
    assert sigma * 2**bits >= 2**12
    s = lattice_variance(sigma, bits)
    assert Fraction(s, 4**bits) >= Fraction(sigma) ** 2
    overshoot = (Fraction(s, 4**bits) - Fraction(sigma) ** 2) / Fraction(sigma) ** 2
    assert overshoot <= Fraction(1, s - 1)
    noise = LatticeNoise(sigma, bits, s).sample(5000, 1)
    assert np.all(noise * 2**bits == np.rint(noise * 2**bits))
    # non-representable σ: read exactly, S·4^-b ≥ σ²
    assert Fraction(lattice_variance(0.1, 20), 4**20) >= Fraction(0.1) ** 2
    with pytest.raises(InvalidParameterError, match="variance="):
        sample_discrete_gaussian(0, 3)
    with pytest.raises(InvalidParameterError, match="variance="):
        sample_discrete_gaussian(1.5, 3)  # type: ignore[arg-type]

"""`GaussianMechanism.release` as executed: snapped value + exact discrete Gaussian (issue 11)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest


def test_gaussian_release_hides_the_last_bits_and_lies_on_the_lattice():
    from dpfair.mechanisms import GaussianMechanism

    mech = GaussianMechanism.for_zcdp(0.5, 1.0)
    x = np.array([0.3, 12345.678, -2.5])
    a = mech.release(x, rng=11)
    b = mech.release(np.nextafter(x, np.inf), rng=11)
    c = mech.release(x + 1e-12, rng=11)
    assert np.array_equal(a, b) and np.array_equal(a, c)
    step = mech.lattice_noise(3).step
    assert np.all(a / step == np.rint(a / step))
    # power: the continuous computation separates the same pair
    g1, g2 = np.random.default_rng(11), np.random.default_rng(11)
    assert np.any(x + g1.normal(0, mech.sigma, 3) != x + 1e-12 + g2.normal(0, mech.sigma, 3))


@pytest.mark.parametrize(("sigma", "sens", "dim"),
                         [(1.0, 1.0, 1), (0.01, 3.0, 5), (1e7, 1e-3, 2), (3.0, 1e5, 100)])
def test_gaussian_lattice_keeps_the_stated_rho(sigma, sens, dim):
    from dpfair.mechanisms import GaussianMechanism

    mech = GaussianMechanism(sigma, sens)
    noise = mech.lattice_noise(dim)
    step = Fraction(noise.step)
    lattice_sens = Fraction(sens) / step + Fraction(math.sqrt(dim)) * (1 + Fraction(1, 2**40))
    rho_exec = lattice_sens**2 / (2 * noise.variance)
    assert rho_exec <= Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2)
    extra = math.sqrt(dim) * noise.step / sens
    assert noise.scale <= sigma * (1 + extra) * (1 + 1e-3)
    if sigma / sens <= 2**24:
        assert extra <= math.sqrt(dim) * 2.0**-20


def test_gaussian_release_noise_has_the_stated_scale():
    from dpfair.mechanisms import GaussianMechanism

    mech = GaussianMechanism(2.0, 1.0)
    out = mech.release(np.zeros(200_000), rng=5)
    # the sample variance of 2e5 draws: sd of s²/σ² is √(2/n) ≈ 0.0032; 6 sd → 0.02
    assert abs(out.var() / mech.lattice_noise(200_000).scale ** 2 - 1) < 0.02
    assert abs(out.mean()) < 6 * 2.0 / math.sqrt(200_000)


def test_gaussian_release_clamps_huge_values_instead_of_refusing_them():
    """A refusal that depends on the value's size would be a 1-bit leak (attack review)."""
    from dpfair._errors import InvalidParameterError
    from dpfair.mechanisms import GaussianMechanism

    mech = GaussianMechanism(1.0)
    step = mech.lattice_noise(1).step
    small, big = mech.release(np.array([2.0**41 - 1]), rng=0), mech.release(
        np.array([1e300]), rng=0)
    assert np.isfinite(small).all() and np.isfinite(big).all()
    assert abs(big[0] - 2.0**61 * step) < 50  # clamped to the public range
    with pytest.raises(InvalidParameterError, match="value"):
        mech.release(np.array([np.nan]), rng=0)  # a programming error, not a data value

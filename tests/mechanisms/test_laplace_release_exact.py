"""`LaplaceMechanism.release` as executed: snapped value + exact discrete Laplace (issue 11).

The attacks of Mironov (2012): neighbours that differ in the last bits of one value must
not be separable by the released binary64 number; the noise must have exactly the
discrete Laplace law whose pmf ratios give ε.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfair.mechanisms import LaplaceMechanism
from tests._stats import FAIL_PROB


@pytest.mark.parametrize(("epsilon", "sensitivity"),
                         [(0.5, 2.0), (1.0, 1.0), (3e-6, 1.0), (7.3, 1e-9), (0.1, 1e6)])
def test_integer_scale_gives_the_stated_epsilon_exactly(epsilon, sensitivity):
    mech = LaplaceMechanism(epsilon, sensitivity)
    lam, t = mech.lattice()
    assert math.frexp(lam)[0] == 0.5  # a power of two
    steps = Fraction(sensitivity) / Fraction(lam) + 1  # worst shift of the snapped value
    assert steps / t <= Fraction(epsilon)  # every pmf ratio ≤ exp(steps/t) ≤ e^ε
    extra = 2.0 ** (2 - min(30, 31 + math.frexp(epsilon)[1] - 1))
    assert t * lam <= mech.scale * (1 + extra)  # documented bound on the extra noise
    assert t <= 2**32
    if epsilon >= 0.5:
        assert t * lam <= mech.scale * (1 + 2**-28)


def test_tiny_epsilon_is_refused_with_a_clear_message():
    from dpfair._errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="epsilon"):
        LaplaceMechanism(1e-9, 1.0).lattice()


def test_last_bits_of_the_value_do_not_reach_the_output():
    mech = LaplaceMechanism(1.0, 1.0)
    for x in (0.3, 1e-7, 12345.678, -2.5):
        a = mech.release(x, rng=7, size=200)
        b = mech.release(math.nextafter(x, math.inf), rng=7, size=200)
        c = mech.release(x + 1e-12, rng=7, size=200)
        assert np.array_equal(a, b) and np.array_equal(a, c)


def test_the_continuous_computation_does_separate_them():
    """Power: numpy's fl(x + Laplace) on the same pair gives different numbers."""
    gen_a, gen_b = np.random.default_rng(7), np.random.default_rng(7)
    a = 0.3 + gen_a.laplace(0.0, 1.0, 200)
    b = 0.3 + 1e-12 + gen_b.laplace(0.0, 1.0, 200)
    assert np.count_nonzero(a != b) > 150


def test_outputs_lie_on_the_public_lattice_and_follow_the_discrete_laplace_law():
    mech = LaplaceMechanism(0.7, 3.0)
    lam, t = mech.lattice()
    x = 1.2345678901
    k = round(Fraction(x) / Fraction(lam))
    n = 200_000
    out = mech.release(x, rng=2024, size=n)
    steps = out / lam
    assert np.all(steps == np.rint(steps))
    z = steps - k
    # Exact law: P(Z = z) = (1 − q)/(1 + q)·q^|z|, q = e^{−1/t}; compare bin counts on
    # deciles of the scale with two-sided exact binomial bounds (union bound over bins).
    q = math.exp(-1.0 / t)
    edges = np.array([-np.inf, -3, -1.5, -0.5, -0.1, 0.1, 0.5, 1.5, 3, np.inf]) * t

    def cdf(v: float) -> float:  # P(Z ≤ v) for real v
        if v == np.inf:
            return 1.0
        if v == -np.inf:
            return 0.0
        m = math.floor(v)
        if m < 0:
            return q ** (-m) / (1 + q)
        return 1.0 - q ** (m + 1) / (1 + q)

    counts = np.histogram(z, bins=np.nextafter(edges, np.inf))[0]
    per_bin = FAIL_PROB / (2 * counts.size)
    for i, c in enumerate(counts):
        p = cdf(np.nextafter(edges[i + 1], np.inf)) - cdf(np.nextafter(edges[i], np.inf))
        lo = stats.binom.ppf(per_bin, n, p)
        hi = stats.binom.isf(per_bin, n, p)
        assert lo <= c <= hi, (i, c, lo, hi)


def test_huge_and_tiny_values_are_released_exactly():
    mech = LaplaceMechanism(1.0, 1.0)
    lam, _ = mech.lattice()
    assert mech.release(1e300, rng=1) == pytest.approx(1e300)
    tiny = mech.release(5e-320, rng=1)
    assert tiny / lam == np.rint(tiny / lam)
    clipped = mech.release(0.3, rng=2, clip=(0.0, 1.0), size=50)
    assert np.all((clipped >= 0.0) & (clipped <= 1.0))


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_values_are_refused(bad):
    from dpfair._errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="value"):
        LaplaceMechanism(1.0, 1.0).release(bad, rng=0)


# --------------------------------------------------------------------- GaussianMechanism


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

"""The generic mechanisms added for the facility baselines: Laplace, discrete EM, windowed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpfair import InvalidParameterError
from dpfair.mechanisms.discrete import DiscreteExponentialMechanism, DiscreteLaw
from dpfair.mechanisms.laplace import ClippedLaplaceLaw, LaplaceMechanism
from dpfair.mechanisms.windowed import sample_pieces_windowed
from tests._stats import FAIL_PROB, min_successes


def test_laplace_mechanism_scale_privacy_and_law():
    mech = LaplaceMechanism(0.5, 2.0)
    assert mech.scale == 4.0 and mech.privacy.epsilon == 0.5
    law = mech.law(1.0, clip=(0.0, 3.0))
    assert law.atom_lo == pytest.approx(0.5 * math.exp(-1 / 4))
    assert law.atom_hi == pytest.approx(0.5 * math.exp(-2 / 4))
    t = np.linspace(-1, 4, 101)
    np.testing.assert_allclose(law.cdf(t) + law.sf(t), 1.0, atol=1e-15)
    assert law.cdf(0.0) == pytest.approx(law.atom_lo)
    assert law.prob_below(0.0) == 0.0 and law.prob_above(3.0) == pytest.approx(law.atom_hi)
    mass = integrate.quad(lambda u: float(law.pdf(u)), 0, 3)[0]
    assert mass + law.atom_lo + law.atom_hi == pytest.approx(1.0)
    with pytest.raises(InvalidParameterError, match="sensitivity="):
        LaplaceMechanism(1.0, 0.0)


@pytest.mark.parametrize(("lower", "upper", "center"),
                         [(-np.inf, np.inf, 1.0), (0.5, 2.0, 0.3), (-1, 0.0, 1.0),
                          (2.5, 10, 1.0), (0.2, 0.3, 0.25)])
def test_clipped_laplace_interval_moments_match_quadrature(lower, upper, center):
    law = ClippedLaplaceLaw(1.0, 0.7, 0.0, 3.0)
    m0, m1 = law.interval_moments(lower, upper, center)
    a, b = max(lower, 0.0), min(upper, 3.0)
    q0 = integrate.quad(lambda u: float(law.pdf(u)), a, b)[0] if b > a else 0.0
    q1 = integrate.quad(lambda u: float(law.pdf(u)) * (u - center), a, b)[0] if b > a else 0.0
    if lower < 0.0 <= upper:
        q0 += law.atom_lo
        q1 += law.atom_lo * (0.0 - center)
    if lower < 3.0 <= upper:
        q0 += law.atom_hi
        q1 += law.atom_hi * (3.0 - center)
    assert float(m0) == pytest.approx(q0, abs=1e-12)
    assert float(m1) == pytest.approx(q1, abs=1e-12)


@pytest.mark.statistical
def test_clipped_laplace_sampler(seed):
    law = ClippedLaplaceLaw(0.2, 0.5, 0.0, 1.0)
    draws = law.sample(size=20_000, rng=seed)
    n_lo = int(np.sum(draws == 0.0))
    assert n_lo >= min_successes(20_000, law.atom_lo)
    inside = draws[(draws > 0) & (draws < 1)]
    cond = lambda t: (law.cdf(t) - law.atom_lo) / (1 - law.atom_lo - law.atom_hi)  # noqa: E731
    assert stats.kstest(inside, cond).pvalue > FAIL_PROB


def test_discrete_law_and_mechanism():
    law = DiscreteLaw(np.array([0.0, 1.0, 2.0]), np.log(np.array([1.0, 2.0, 1.0])))
    np.testing.assert_allclose(law.probabilities, [0.25, 0.5, 0.25])
    assert law.cdf(1.0) == pytest.approx(0.75) and law.prob_below(1.0) == pytest.approx(0.25)
    assert law.sf(1.0) == pytest.approx(0.25) and law.prob_above(1.0) == pytest.approx(0.75)
    assert law.pmf(1.0) == pytest.approx(0.5) and law.pmf(0.5) == 0.0
    assert law.ppf(0.5) == 1.0 and law.mean() == pytest.approx(1.0)
    tiny = DiscreteLaw(np.arange(3.0), np.array([0.0, -300.0, -600.0]))
    assert float(tiny.sf(0.5)) == pytest.approx(math.exp(-300), rel=1e-12)  # tail kept
    mech = DiscreteExponentialMechanism(1.0)
    l2 = mech.law([2.0, 0.0, 1.0], [0.0, -2.0, -1.0])  # unsorted candidates are sorted
    np.testing.assert_array_equal(l2.support, [0.0, 1.0, 2.0])
    assert l2.probabilities[2] > l2.probabilities[0]
    assert mech.privacy.epsilon == 1.0 and mech.privacy_zcdp.rho == pytest.approx(1 / 8)
    with pytest.raises(InvalidParameterError, match="strictly increasing"):
        DiscreteLaw(np.array([0.0, 0.0]), np.zeros(2))


@pytest.mark.statistical
def test_sample_pieces_windowed_is_exact_even_with_a_loose_outside_bound(seed):
    rng = np.random.default_rng(seed)
    log_mass = np.log(rng.uniform(0.1, 1.0, 12))
    probs = np.exp(log_mass - np.logaddexp.reduce(log_mass))
    # window = pieces 4..7; outside bound deliberately 3x too large
    outside_true = np.exp(log_mass[[0, 1, 2, 3, 8, 9, 10, 11]]).sum()
    draws = sample_pieces_windowed(log_mass[4:8], 4, math.log(3 * outside_true),
                                   lambda: log_mass, 30_000, rng)
    counts = np.bincount(draws, minlength=12)
    assert stats.chisquare(counts, probs * draws.size).pvalue > FAIL_PROB
    with pytest.raises(InvalidParameterError, match="size="):
        sample_pieces_windowed(log_mass, 0, -np.inf, lambda: log_mass, -1, rng)

import math

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidParameterError
from dpfair.mechanisms import GaussianMechanism, analytic_gaussian_delta, analytic_gaussian_sigma


def test_zcdp_calibration_is_exact():
    mech = GaussianMechanism.for_zcdp(0.3, math.sqrt(2))
    assert mech.privacy.rho == pytest.approx(0.3, rel=1e-12)
    assert mech.sigma == pytest.approx(math.sqrt(2) / math.sqrt(0.6), rel=1e-15)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_analytic_sigma_is_smallest_valid(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta, 1.0)
    assert analytic_gaussian_delta(sigma, 1.0, eps) <= delta
    assert analytic_gaussian_delta(sigma * (1 - 1e-6), 1.0, eps) > delta
    if eps < 1:  # the classical calibration is valid (and looser) only there
        assert sigma < math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_analytic_delta_matches_privacy_loss_definition():
    # δ(ε) = P[L > ε] − e^ε P[L' < −ε] with the privacy loss L ~ N(μ, 2μ), μ = Δ²/(2σ²)
    sigma, eps = 1.7, 0.8
    mu = 1 / (2 * sigma**2)
    exact = stats.norm.sf(eps, mu, math.sqrt(2 * mu)) - math.exp(eps) * stats.norm.cdf(
        -eps, mu, math.sqrt(2 * mu)
    )
    assert analytic_gaussian_delta(sigma, 1.0, eps) == pytest.approx(exact, rel=1e-10)


def test_scale_invariance_in_sensitivity():
    assert analytic_gaussian_sigma(1.0, 1e-5, 3.0) == pytest.approx(
        3 * analytic_gaussian_sigma(1.0, 1e-5, 1.0), rel=1e-9
    )


def test_privacy_at_inverts_calibration():
    mech = GaussianMechanism.for_approx(0.7, 1e-6, 2.0)
    assert mech.privacy_at(1e-6).epsilon == pytest.approx(0.7, rel=1e-6)


def test_release_is_seeded_and_fresh():
    mech = GaussianMechanism(sigma=2.0)
    a = mech.release(np.zeros(5), rng=np.random.default_rng(1))
    b = mech.release(np.zeros(5), rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(2)
    assert not np.array_equal(mech.release(np.zeros(5), gen), mech.release(np.zeros(5), gen))


@pytest.mark.parametrize("kwargs", [{"sigma": 0.0}, {"sigma": -1.0}, {"sigma": 1.0,
                                                                     "l2_sensitivity": 0}])
def test_bad_parameters(kwargs):
    with pytest.raises(InvalidParameterError):
        GaussianMechanism(**kwargs)
    with pytest.raises(InvalidParameterError, match="delta"):
        analytic_gaussian_sigma(1.0, 1.5, 1.0)

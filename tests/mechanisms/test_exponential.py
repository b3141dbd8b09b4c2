import math

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidParameterError
from dpfair.mechanisms import ExponentialMechanism, PiecewiseConstantLaw
from tests._stats import FAIL_PROB


def _law(seed=0, k=30, eps=1.0):
    rng = np.random.default_rng(seed)
    edges = np.concatenate(([0.0], np.sort(rng.uniform(0, 10, k - 1)), [10.0]))
    edges[5] = edges[4]  # a zero-length piece
    scores = -np.abs(np.arange(k) - k // 2).astype(float)
    return ExponentialMechanism(eps).law(edges, scores)


def test_law_normalises_and_cdf_ppf_invert():
    law = _law()
    assert law.piece_probabilities.sum() == pytest.approx(1.0, abs=1e-14)
    assert law.cdf(10.0) == 1.0 and law.cdf(0.0) == 0.0 and law.cdf(-1) == 0.0
    t = np.linspace(0.01, 9.99, 500)
    np.testing.assert_allclose(law.ppf(law.cdf(t)), t, atol=1e-9)
    np.testing.assert_allclose(law.cdf(t) + law.sf(t), 1.0, atol=1e-14)
    # the density integrates to the cdf increments
    mids = 0.5 * (law.edges[:-1] + law.edges[1:])
    np.testing.assert_allclose(law.pdf(mids) * np.diff(law.edges), law.piece_probabilities,
                               atol=1e-15)


def test_sampler_matches_exact_law_ks():
    law = _law(seed=3)
    draws = law.sample(size=20_000, rng=np.random.default_rng(11))
    assert stats.kstest(draws, law.cdf).pvalue > FAIL_PROB


def test_extreme_epsilon_and_many_pieces_stay_finite():
    n = 200_000
    edges = np.linspace(0.0, 1.0, n + 1)
    scores = -np.abs(np.arange(n) - 123_456).astype(float)
    law = ExponentialMechanism(50.0).law(edges, scores)
    assert math.isfinite(law.log_norm)
    x = law.sample(size=1000, rng=0)
    assert np.all((x >= edges[123_456 - 3]) & (x <= edges[123_456 + 4]))
    assert law.sf(edges[123_456 + 10]) > 0  # tiny tail probabilities are not lost
    assert law.sf(edges[123_456 + 10]) < 1e-100


def test_density_ratio_of_mechanism_is_at_most_e_eps_for_sensitivity_one_scores():
    rng = np.random.default_rng(5)
    edges = np.concatenate(([0.0], np.sort(rng.uniform(0, 1, 49)), [1.0]))
    s = -np.abs(np.arange(50) - 20).astype(float)
    s2 = s + rng.choice([-1.0, 0.0, 1.0], size=50)  # any sensitivity-1 perturbation
    mech = ExponentialMechanism(0.7)
    l1, l2 = mech.law(edges, s), mech.law(edges, s2)
    t = 0.5 * (edges[:-1] + edges[1:])
    assert np.max(np.abs(l1.logpdf(t) - l2.logpdf(t))) <= 0.7 + 1e-12


def test_privacy_properties():
    mech = ExponentialMechanism.for_zcdp(0.25)
    assert mech.epsilon == pytest.approx(math.sqrt(2.0))
    assert mech.privacy_zcdp.rho == pytest.approx(0.25, rel=1e-14)
    assert mech.privacy.epsilon == pytest.approx(math.sqrt(2.0))


def test_bad_laws():
    with pytest.raises(InvalidParameterError, match="one more"):
        PiecewiseConstantLaw(np.array([0.0, 1.0]), np.array([0.0, 0.0]))
    with pytest.raises(InvalidParameterError, match="non-decreasing"):
        PiecewiseConstantLaw(np.array([0.0, 2.0, 1.0]), np.array([0.0, 0.0]))
    with pytest.raises(InvalidParameterError, match="no mass"):
        PiecewiseConstantLaw(np.array([1.0, 1.0]), np.array([0.0]))
    with pytest.raises(InvalidParameterError, match="epsilon"):
        ExponentialMechanism(0.0)

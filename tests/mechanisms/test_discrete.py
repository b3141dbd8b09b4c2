"""The exponential mechanism over finite candidates and its exact law (`discrete.py`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair import InvalidParameterError
from dpfair.mechanisms.discrete import DiscreteExponentialMechanism, DiscreteLaw


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

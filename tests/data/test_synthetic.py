"""Synthetic designs: shapes, reproducibility, and that the stated medians are the medians."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidParameterError
from dpfair.data.synthetic import (
    DESIGNS,
    PAPER_BOUNDS,
    get_design,
    lognormal_sample,
    pareto_sample,
    uniform_sample,
)

FAIL_PROB = 1e-6


def test_registry_has_the_issue_designs() -> None:
    assert {"lognormal", "lognormal_sigma5", "normal", "uniform", "skewed_heavy"} <= set(DESIGNS)


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_design_sample_shape_and_seed(name: str, seed: int) -> None:
    d = DESIGNS[name]
    a = d.sample(500, rng=seed)
    b = d.sample(500, rng=np.random.default_rng(seed))
    assert a.shape == (500,) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    assert PAPER_BOUNDS[0] < d.median < PAPER_BOUNDS[1]
    assert d.bounds == PAPER_BOUNDS


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_cdf_at_median_is_one_half(name: str) -> None:
    d = DESIGNS[name]
    assert float(d.cdf(d.median)) == pytest.approx(0.5, abs=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_stated_median_splits_samples_in_half(name: str, seed: int) -> None:
    """#{X_i < median} ~ Bin(n, 1/2) exactly when the stated median is the true one.

    Two-sided exact binomial acceptance region at total level 1e-6 (false alarm < 1e-6).
    At n = 200,000 a stated median with P(X < m) = 0.51 is caught with probability
    > 0.9999, and so is any of the plausible bugs (wrong scale, Lomax instead of
    Pareto I, σ on the wrong scale), which are far larger.
    """
    n = 200_000
    d = DESIGNS[name]
    below = int(np.sum(d.sample(n, rng=seed) < d.median))
    lo = stats.binom.ppf(FAIL_PROB / 2, n, 0.5)
    hi = stats.binom.isf(FAIL_PROB / 2, n, 0.5)
    assert lo <= below <= hi


def test_lognormal_is_the_paper_design() -> None:
    x = lognormal_sample(10, sigma=2.0, rng=3)
    z = np.random.default_rng(3).normal(np.log(1.5), 2.0, size=10)
    np.testing.assert_allclose(x, np.exp(z), rtol=1e-15)


def test_pareto_support_and_uniform_range() -> None:
    assert pareto_sample(1000, shape=1.0, scale=2.0, rng=0).min() >= 2.0
    u = uniform_sample(1000, low=-1.0, high=1.0, rng=0)
    assert u.min() >= -1.0 and u.max() < 1.0


def test_designs_pickle() -> None:
    d = pickle.loads(pickle.dumps(DESIGNS["skewed_heavy"]))
    np.testing.assert_array_equal(d.sample(5, rng=1), DESIGNS["skewed_heavy"].sample(5, rng=1))


def test_bad_arguments() -> None:
    with pytest.raises(InvalidParameterError, match=r"^n=0"):
        lognormal_sample(0)
    with pytest.raises(InvalidParameterError, match=r"^sigma=-1"):
        lognormal_sample(10, sigma=-1)
    with pytest.raises(InvalidParameterError, match=r"low=1.*high=0"):
        uniform_sample(10, low=1.0, high=0.0)
    with pytest.raises(InvalidParameterError, match=r"name='cauchy'.*'lognormal'"):
        get_design("cauchy")

"""Exact discrete Laplace sampler (CKS 2020) and the clipped grid law."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidParameterError
from dpfair.mechanisms.discrete_laplace import (
    ClippedDiscreteLaplaceLaw,
    bernoulli_exp,
    discrete_laplace_scale,
    sample_discrete_laplace,
)
from tests._stats import FAIL_PROB


@pytest.mark.parametrize(("num", "den"), [(0, 1), (1, 1), (3, 4), (1, 7)])
def test_bernoulli_exp_frequency(num, den):
    """Binomial two-sided bound at FAIL_PROB around exp(−num/den)."""
    n = 40_000
    hits = int(bernoulli_exp(np.full(n, num), den, np.random.default_rng(num * 10 + den)).sum())
    p = math.exp(-num / den)
    lo, hi = stats.binom.ppf(FAIL_PROB / 2, n, p), stats.binom.isf(FAIL_PROB / 2, n, p)
    assert lo <= hits <= hi


@pytest.mark.parametrize("scale", [1, 3, 1000])
def test_discrete_laplace_matches_its_pmf(scale):
    """Chi-square of 60,000 draws against P(Z = z) = c₀ q^{|z|} (tails pooled)."""
    z = sample_discrete_laplace(scale, 60_000, np.random.default_rng(scale))
    q = math.exp(-1.0 / scale)
    c0 = (1 - q) / (1 + q)
    w = max(1, scale // 4)  # bins of width w on each side
    edges = np.arange(-8 * w, 8 * w + 1, w)
    expected, observed = [], []
    for a, b in itertools.pairwise(edges):
        ks = np.arange(a, b)
        expected.append(float(np.sum(c0 * q ** np.abs(ks))))
        observed.append(int(np.sum((z >= a) & (z < b))))
    expected.append(1.0 - sum(expected))
    observed.append(int(z.size - sum(observed)))
    exp_counts = np.array(expected) * z.size
    assert stats.chisquare(observed, exp_counts).pvalue > FAIL_PROB


def test_cap_clips_exactly_and_scale_is_exact():
    z = sample_discrete_laplace(5, 20_000, np.random.default_rng(0), cap=3)
    assert z.min() == -3 and z.max() == 3
    assert discrete_laplace_scale(2**32, 0.1) == math.ceil(2**32 / 0.1)  # 0.1's binary64
    assert 2**32 / discrete_laplace_scale(2**32, 0.1) <= 0.1
    with pytest.raises(InvalidParameterError, match="scale="):
        sample_discrete_laplace(0, 3)
    with pytest.raises(InvalidParameterError, match="den"):
        bernoulli_exp([2], 1)


def test_clipped_law_sums_match_brute_force():
    law = ClippedDiscreteLaplaceLaw(5, 3, 16, -1.0, 3.0)
    j = np.arange(17)
    p, x = law.pmf_index(j), law.location(j)
    assert p.sum() == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(law.cdf(x), np.cumsum(p), atol=1e-15)
    np.testing.assert_allclose(law.prob_above(x), 1 - np.cumsum(p) + p, atol=1e-15)
    for a, b, c in [(-np.inf, np.inf, 0.3), (0.1, 1.6, 0.2), (-3, -1.0, 0.5), (2.0, 9, 0.1)]:
        m0, m1 = law.interval_moments(a, b, c)
        sel = (x > a) & (x <= b)
        assert float(m0) == pytest.approx(p[sel].sum(), abs=1e-14)
        assert float(m1) == pytest.approx(float(np.sum(p[sel] * (x[sel] - c))), abs=1e-13)
    assert law.mean() == pytest.approx(float(np.dot(p, x)), abs=1e-14)
    assert law.pmf(0.1) == 0.0 and law.pmf(x[3]) == pytest.approx(p[3])
    draws = law.sample(size=30_000, rng=4)
    counts = np.array([np.sum(draws == v) for v in x])
    assert counts.sum() == draws.size
    assert stats.chisquare(counts, p * draws.size).pvalue > FAIL_PROB

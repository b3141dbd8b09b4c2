"""Data-set families, samplers, worst cases and lower-bound pairs (§6, §7.3)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidParameterError
from dpfair.facility import (
    change_one_distance,
    ctm_worst_case,
    fair_lower_bound_pair,
    impossibility_pair,
    is_ctm,
    ks_distance,
    optimal_location,
    single_peaked_law,
    spm_lambda,
    spm_lower_bound_pair,
    spm_worst_case,
    triangular_law,
    truncated_normal_law,
)
from tests._stats import FAIL_PROB
from tests.facility._helpers import DOMAIN, random_ctm


def test_is_ctm_on_known_sets():
    assert is_ctm(np.linspace(0, 1, 11))  # equal gaps (to rounding)
    assert is_ctm(np.full(9, 0.3))
    assert is_ctm([0.5])
    assert is_ctm([0.0, 1.0])
    assert is_ctm([0.0, 0.5, 0.75, 0.8, 0.85, 1.0])  # gaps .5 .25 | .05 .05 .15
    assert not is_ctm([0.0, 0.1, 0.5, 0.6, 0.7])  # left gaps grow towards the median
    assert not is_ctm([0.0, 0.4, 0.5, 0.9, 0.95])  # right gaps shrink away from it
    rng = np.random.default_rng(0)
    for _ in range(50):
        for lower in (True, False):
            x = random_ctm(rng, int(rng.integers(1, 30)), lower=lower)
            assert is_ctm(rng.permutation(x), median="lower" if lower else "upper")


@pytest.mark.parametrize("median", ["lower", "upper"])
@pytest.mark.parametrize("n", [1, 2, 7, 8, 101])
def test_ctm_worst_case_structure(n, median):
    k_med = (n + 1) // 2 if median == "lower" else n // 2 + 1
    side = k_med - 1 if median == "lower" else n - k_med
    for k in range(side + 1):
        x = ctm_worst_case(n, k, DOMAIN, median=median)
        assert x.size == n and np.all(np.diff(x) >= 0)
        assert is_ctm(x, median=median)
        t = optimal_location(x, median=median)
        assert t == (1.0 if median == "lower" else 0.0)
        assert np.count_nonzero(x != t) == side - k
    with pytest.raises(InvalidParameterError, match="k="):
        ctm_worst_case(n, side + 1, DOMAIN, median=median)


def test_ctm_worst_case_matches_the_paper_for_odd_n():
    # n = 11, k = 2: ⌈n/2⌉ + k = 8 agents at m/2 and ⌊n/2⌋ − k = 3 at m/2 − i·m/3
    x = ctm_worst_case(11, 2, (-0.5, 0.5))
    np.testing.assert_allclose(x, [-0.5, -1 / 6, 1 / 6] + [0.5] * 8, atol=1e-15)


def test_spm_worst_case_structure():
    n, lam = 101, 0.05
    for k in (0, 5, 20):
        x = spm_worst_case(n, k, lam, DOMAIN)
        s = int(np.ceil(lam * n)) - 1
        assert np.count_nonzero(x == 0.0) == s
        assert np.count_nonzero(x == 1.0) == n - (50 - k)
        spaced = x[(x > 0) & (x < 1)]
        np.testing.assert_allclose(np.diff(spaced), 1 / (50 - k + lam * n))
    with pytest.raises(InvalidParameterError, match="lam"):
        spm_worst_case(11, 4, 0.5, DOMAIN)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "law",
    [
        triangular_law(DOMAIN),
        triangular_law(DOMAIN, peak=0.2),
        truncated_normal_law(DOMAIN, peak=0.7, scale=0.1),
        truncated_normal_law((-3.0, 5.0), peak=0.0, scale=1.0, support=(-2.0, 4.0)),
        single_peaked_law(lambda t: np.exp(-np.abs(t - 0.4) * 5), DOMAIN, peak=0.4),
        single_peaked_law(lambda t: np.where(t < 0.6, 1 + t, 3 - 2 * t), DOMAIN, peak=0.6),
    ],
    ids=["tri", "tri-skew", "tnorm", "tnorm-support", "laplace-like", "kinked"],
)
def test_single_peaked_samplers_match_their_cdf(law, seed):
    draws = law.sample(20_000, rng=seed)
    assert stats.kstest(draws, law.cdf).pvalue > FAIL_PROB
    assert law.cdf(law.peak) == pytest.approx(0.5, abs=1e-8)  # the peak is the median
    a, b = law.support
    t = np.linspace(a, b, 2001)
    f = law.pdf(t)
    left, right = f[t <= law.peak], f[t >= law.peak]
    assert np.all(np.diff(left) >= -1e-12) and np.all(np.diff(right) <= 1e-12)


def test_custom_law_rejects_non_single_peaked_density():
    with pytest.raises(InvalidParameterError, match="not single-peaked"):
        single_peaked_law(lambda t: 1 + np.sin(12 * t), DOMAIN, peak=0.5)
    with pytest.raises(InvalidParameterError, match="peak="):
        triangular_law(DOMAIN, peak=1.0)


def test_ks_distance_exact():
    assert ks_distance([0.5], lambda t: t) == pytest.approx(0.5)
    x = np.array([0.25, 0.75])
    assert ks_distance(x, lambda t: np.clip(t, 0, 1)) == pytest.approx(0.25)
    assert ks_distance([0.3, 0.3], lambda t: t) == pytest.approx(0.7)


def test_pairs_have_the_claimed_structure():
    pair = impossibility_pair(9, DOMAIN)
    assert pair.optima == (0.0, 1.0) and pair.distance == 1 and pair.radius == 0.5
    assert pair.probability_bound(1.0) == pytest.approx(1 / (1 + np.e))
    even = impossibility_pair(8, DOMAIN)
    assert even.optima == (0.0, 1.0) and even.distance == 1
    assert impossibility_pair(1, DOMAIN).optima == (0.0, 1.0)

    pair = fair_lower_bound_pair(21, 3, DOMAIN)
    t0, tg = pair.optima
    assert t0 == pytest.approx(0.5) and tg == pytest.approx(0.5 - 3 / 20)
    assert is_ctm(pair.first) and is_ctm(pair.second)
    assert pair.distance == 6 and pair.radius == pytest.approx(1.5 / 20)
    with pytest.raises(InvalidParameterError, match="steps="):
        fair_lower_bound_pair(21, 7, DOMAIN)

    pair = spm_lower_bound_pair(101, 0.1, DOMAIN)
    s = int(np.floor(0.1 * 101)) - 1
    t1, t2 = pair.optima
    assert pair.distance == 1 and abs(t2 - t1) == pytest.approx(s / 101)
    # both lie within KS distance lam of the uniform law, which is single-peaked
    for d in (pair.first, pair.second):
        assert ks_distance(d, lambda t: np.clip(t, 0, 1)) <= 0.1 + 1e-12
    assert pair.to_dict()["theorem"] == "Thm 7.24"


def test_change_one_distance():
    assert change_one_distance([1, 2, 3], [3, 2, 1]) == 0
    assert change_one_distance([1, 1, 2], [1, 2, 2]) == 1
    assert change_one_distance([0, 0, 0], [1, 1, 1]) == 3
    with pytest.raises(InvalidParameterError, match="equal n"):
        change_one_distance([1], [1, 2])


def test_spm_lambda_lp():
    # CTM data with distinct points are within 1/(n-1) of a single-peaked law (Thm 6.7)
    rng = np.random.default_rng(4)
    for n in (7, 20, 21):
        x = random_ctm(rng, n, distinct=True)
        fit = spm_lambda(x, DOMAIN)
        assert 0 <= fit.lam <= 1 / (n - 1) + 1e-7
    # ...but Thm 6.7 needs distinct points: all agents at one point is in CTM, yet a
    # continuous cdf cannot follow a jump of height 1 closer than 1/2
    assert is_ctm(np.full(11, 0.5))
    assert spm_lambda(np.full(11, 0.5), DOMAIN).lam == pytest.approx(0.5)
    # a sample from a single-peaked law: λ is at most the KS distance to that law
    law = truncated_normal_law(DOMAIN, peak=0.45, scale=0.15)
    x = law.sample(200, rng=5)
    fit = spm_lambda(x, DOMAIN, peaks=[0.45])
    assert fit.lam <= ks_distance(x, law.cdf) + 1e-7
    assert fit.lam >= 0.5 / 200 - 1e-9  # a step of 1/n cannot be matched closer than 1/(2n)
    # a bimodal data set is far from every single-peaked law
    bimodal = impossibility_pair(41, DOMAIN).first
    assert spm_lambda(bimodal, DOMAIN).lam > 0.2

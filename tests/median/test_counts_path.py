"""The aggregated (histogram) path: equal to the raw path where it should be, valid always."""

from __future__ import annotations

import numpy as np
import pytest

import dpfair
from dpfair import InvalidDataError, InvalidParameterError
from dpfair.mechanisms import PiecewiseConstantLaw, leaf_counts, leaf_edges
from dpfair.median import confidence_interval, confidence_interval_from_counts
from dpfair.median._binsearch import grid_depth
from dpfair.median._expmech import SortedCounts, order_statistic_law, sample_order_statistic
from tests._stats import min_successes

BOUNDS = (-5.0, 15.0)


def _counts(x, theta):
    depth = grid_depth(BOUNDS[1] - BOUNDS[0], theta)
    return leaf_counts(np.clip(x, *BOUNDS), BOUNDS, depth)


def _refine_from(x):
    def refine(bounds, depth):
        return leaf_counts(np.clip(x, *bounds), bounds, depth)

    return refine


@pytest.mark.parametrize("method", ["cdf", "binsearch", "binsearch_cdf"])
def test_tree_methods_identical_to_raw_path(method):
    x = np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 3000)
    x[:3] = [-20.0, 40.0, 15.0]
    raw = confidence_interval(x, rho=0.5, bounds=BOUNDS, method=method, rng=5)
    agg = confidence_interval_from_counts(_counts(x, raw.granularity), rho=0.5, bounds=BOUNDS,
                                          method=method, rng=5, refine=_refine_from(x))
    assert (agg.low, agg.high) == (raw.low, raw.high)
    assert agg.privacy.rho == pytest.approx(0.5)
    assert agg.diagnostics["aggregated"] is True


def _dense_law(values, counts, k, eps, theta):
    x = np.repeat(values, counts)
    return order_statistic_law(x, k, eps, BOUNDS, theta)


@pytest.mark.parametrize("k", [0, 1, 7, 10, 11, 25, 40])
def test_compressed_law_equals_dense_law(k):
    values = leaf_edges(BOUNDS, 4)[1:]
    counts = np.array([0, 3, 0, 0, 5, 2, 0, 7, 1, 0, 0, 9, 6, 0, 4, 3])
    idx, edges, log_mass = SortedCounts(values, counts).sparse_law(k, 1.3, BOUNDS, 0.7)
    dense = _dense_law(values, counts, k, 1.3, 0.7)
    # same masses on the pieces that can carry mass, none elsewhere
    np.testing.assert_allclose(np.exp(log_mass - np.logaddexp.reduce(log_mass)),
                               dense.piece_probabilities[idx], atol=1e-15)
    assert dense.piece_probabilities.sum() == pytest.approx(
        dense.piece_probabilities[idx].sum(), abs=1e-14)
    compressed = PiecewiseConstantLaw(edges, log_mass - np.log(np.maximum(np.diff(edges),
                                                                              1e-300)))
    t = np.linspace(*BOUNDS, 2001)
    np.testing.assert_allclose(compressed.cdf(t), dense.cdf(t), atol=1e-12)


def test_windowed_sampler_on_counts_matches_dense_draws():
    values = leaf_edges(BOUNDS, 6)[1:]
    counts = np.random.default_rng(1).poisson(3.0, 64)
    sample = SortedCounts(values, counts)
    x = np.repeat(values, counts)
    k = int(counts.sum() // 3)
    for seed in range(20):  # same uniforms, same law ⇒ the same draw
        a = sample_order_statistic(sample, k, 2.0, BOUNDS, 0.2, np.random.default_rng(seed))
        b = sample_order_statistic(x, k, 2.0, BOUNDS, 0.2, np.random.default_rng(seed))
        assert a == pytest.approx(b, abs=1e-12)


def test_fallback_branch_on_counts_is_exercised():
    """Tiny ε makes the outside bound large: the sparse full-law branch must work."""
    values = leaf_edges(BOUNDS, 5)[1:]
    counts = np.random.default_rng(2).poisson(2.0, 32)
    sample = SortedCounts(values, counts)
    draws = [sample_order_statistic(sample, 5, 1e-3, BOUNDS, 0.1, np.random.default_rng(s))
             for s in range(200)]
    assert all(BOUNDS[0] <= d <= BOUNDS[1] for d in draws)


@pytest.mark.statistical
@pytest.mark.parametrize("design", ["lognormal", "poisson"])
def test_expmech_from_counts_covers(design):
    reps, rng = 1500, np.random.default_rng(17)
    med = 1.5 if design == "lognormal" else 3.0
    hits = 0
    for _ in range(reps):
        x = (rng.lognormal(np.log(1.5), 1.0, 1000) if design == "lognormal"
             else rng.poisson(3.5, 1000).astype(float))
        counts = _counts(x, 20 / 4096)
        r = confidence_interval_from_counts(counts, rho=0.5, bounds=BOUNDS, method="expmech",
                                            rng=rng)
        hits += r.low <= med <= r.high
    assert hits >= min_successes(reps, 0.95)


def test_counts_validation():
    good = np.ones(512, dtype=int)
    with pytest.raises(InvalidDataError, match="power of two"):
        confidence_interval_from_counts(np.ones(500), rho=0.5, bounds=BOUNDS)
    with pytest.raises(InvalidDataError, match="non-negative integers"):
        confidence_interval_from_counts(-good, rho=0.5, bounds=BOUNDS)
    with pytest.raises(InvalidDataError, match="non-negative integers"):
        confidence_interval_from_counts(good * 0.5, rho=0.5, bounds=BOUNDS)
    with pytest.raises(InvalidDataError, match="empty"):
        confidence_interval_from_counts(good * 0, rho=0.5, bounds=BOUNDS)
    with pytest.raises(InvalidParameterError, match="2\\^9 bins"):
        confidence_interval_from_counts(np.ones(1024, dtype=int), rho=0.5, bounds=BOUNDS,
                                        method="cdf")
    with pytest.raises(InvalidParameterError, match="refine"):
        confidence_interval_from_counts(good, rho=0.5, bounds=BOUNDS, method="binsearch_cdf")
    r = confidence_interval_from_counts(good, rho=0.5, bounds=BOUNDS, method="cdf", rng=0)
    assert r.n == 512
    assert dpfair.median.confidence_interval_from_counts is confidence_interval_from_counts


@pytest.mark.parametrize("use_counts", [False, True])
def test_fallback_branch_matches_exact_law(monkeypatch, use_counts):
    """Shrink the window so the rare O(n) branch runs often, and KS-test the draws."""
    from scipy import stats

    import dpfair.median._expmech as em
    from tests._stats import FAIL_PROB

    monkeypatch.setattr(em, "_WINDOW_MARGIN_DIGITS", -2.0)
    values = leaf_edges(BOUNDS, 7)[1:]
    counts = np.random.default_rng(4).poisson(1.0, 128)
    x = np.repeat(values, counts)
    sample = SortedCounts(values, counts) if use_counts else x
    k = int(x.size // 2)
    law = order_statistic_law(x, k, 1.0, BOUNDS, 0.05)
    gen = np.random.default_rng(9)
    draws = [sample_order_statistic(sample, k, 1.0, BOUNDS, 0.05, gen) for _ in range(3000)]
    outside = np.mean(np.abs(np.searchsorted(x, draws) - k) > 3)
    assert outside > 0.05  # the fallback branch really was exercised
    assert stats.kstest(draws, law.cdf).pvalue > FAIL_PROB

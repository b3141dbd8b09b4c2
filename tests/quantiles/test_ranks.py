"""Exact target ranks for any q (brute force), and the mechanism's neighbour ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfair.median._expmech import CellGrid, cell_order_statistic_law
from dpfair.median._ranks import expmech_lower_failure, expmech_lower_target
from dpfair.quantiles import nonprivate_ranks
from dpfair.quantiles._methods import binsearch_targets, expmech_targets


def _brute_failure(n, eps, c, k, p):
    m = np.arange(n + 1)
    pmf = stats.binom.pmf(m, n, p)
    tail = np.where(m <= k, 1.0, np.minimum(1.0, c * np.exp(-eps * (m - k) / 2.0)))
    return float(pmf @ tail)


@pytest.mark.parametrize("p", [0.05, 0.1, 0.37, 0.5, 0.9])
@pytest.mark.parametrize(("n", "eps", "c"), [(60, 1.0, 50.0), (400, 1.4, 4000.0),
                                             (1500, 0.5, 127.0)])
def test_expmech_failure_matches_brute_force(n, eps, c, p):
    ks = np.arange(0, n + 1, max(1, n // 40))
    fast = expmech_lower_failure(n, eps, c, ks, p)
    slow = np.array([_brute_failure(n, eps, c, int(k), p) for k in ks])
    np.testing.assert_allclose(fast, np.minimum(slow, 1.0), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_expmech_target_is_the_largest_valid_rank(p):
    n, eps, c, level = 500, 1.2, 300.0, 0.025
    k = expmech_lower_target(n, eps, c, level, p)
    assert _brute_failure(n, eps, c, k, p) <= level
    assert _brute_failure(n, eps, c, k + 1, p) > level * (1 - 1e-9)


def test_upper_target_is_the_mirror_of_one_minus_q():
    n, eps, c = 700, 1.0, 200.0
    lo, hi = expmech_targets(n, eps, c, 0.2, 0.02, 0.03)
    lo_m, hi_m = expmech_targets(n, eps, c, 0.8, 0.03, 0.02)
    assert lo is not None and hi is not None
    assert lo + hi_m == n and hi + lo_m == n
    lo, hi = binsearch_targets(n, 6.0, 10, 0.2, 0.02, 0.03)
    lo_m, hi_m = binsearch_targets(n, 6.0, 10, 0.8, 0.03, 0.02)
    assert lo + hi_m == n and hi + lo_m == n


@pytest.mark.parametrize("q", [0.1, 0.5, 0.75])
def test_nonprivate_ranks_exact(q):
    n, alpha = 137, 0.05
    k_low, k_high = nonprivate_ranks(n, q, alpha)
    below = stats.binom.cdf(np.arange(n + 1) - 1, n, q)  # P(x_q < x_(k)), k = 0..n
    assert below[k_low] <= alpha / 2 < below[k_low + 1]
    above = stats.binom.sf(np.arange(n + 1) - 1, n, q)  # P(x_(k) < x_q)
    assert above[k_high] <= alpha / 2 < above[k_high - 1]


def test_nonprivate_ranks_one_sided():
    k_low, k_high = nonprivate_ranks(20, 0.02, 0.05)
    assert k_low is None and k_high is not None


@pytest.mark.parametrize("q", [0.1, 0.9])
def test_quantile_draw_neighbour_ratio(q):
    # The rank-k cell mechanism for a quantile's target is the median's mechanism with
    # another k: its exact law moves by at most e^eps between neighbouring data sets.
    rng = np.random.default_rng(0)
    n, eps = 40, 1.3
    grid = CellGrid.for_bounds((0.0, 1.0), 1.0 / 64)
    x = np.sort(rng.uniform(0, 1, n))
    k_low, k_high = expmech_targets(n, eps, grid.tail_constant, q, 0.2, 0.2)
    for k in (k_low, k_high):
        if k is None:
            continue
        p0 = cell_order_statistic_law(x, k, eps, grid)
        for i in (0, n // 2, n - 1):
            for new in (0.0, 0.5, 1.0):
                y = x.copy()
                y[i] = new
                p1 = cell_order_statistic_law(np.sort(y), k, eps, grid)
                ratio = np.max(np.abs(np.log(p0 / p1)))
                assert ratio <= eps * (1 + 1e-9)
    assert math.isfinite(eps)

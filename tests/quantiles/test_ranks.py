"""Exact target ranks for any q (brute force), and the mechanism's neighbour ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfair.median._expmech import CellGrid, cell_order_statistic_law, order_statistic_law
from dpfair.median._ranks import expmech_lower_failure, expmech_lower_target
from dpfair.quantiles import nonprivate_ranks
from dpfair.quantiles._methods import (
    binsearch_targets,
    expmech_lower_failure_exact,
    expmech_lower_target_exact,
    expmech_targets,
)


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


def _brute_exact_failure(n, eps, c, k, p):
    m = np.arange(n + 1)
    pmf = stats.binom.pmf(m, n, p)
    x = c * np.exp(-eps * (m - k) / 2.0)
    return float(pmf @ np.where(m <= k, 1.0, x / (1.0 + x)))


@pytest.mark.parametrize("p", [0.05, 0.1, 0.5, 0.9])
@pytest.mark.parametrize(("n", "eps", "c"), [(60, 3.0, 50.0), (400, 1.4, 4000.0),
                                             (1500, 0.5, 127.0), (1000, 0.949, 127.0)])
def test_exact_law_failure_matches_brute_force(n, eps, c, p):
    ks = np.arange(0, n + 1, max(1, n // 40))
    fast = expmech_lower_failure_exact(n, eps, c, ks, p)
    slow = np.minimum([_brute_exact_failure(n, eps, c, int(k), p) for k in ks], 1.0)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-14)
    # never above the min(1, C e^{-eps t/2}) bound it replaces
    assert np.all(fast <= expmech_lower_failure(n, eps, c, ks, p) * (1 + 1e-9) + 1e-15)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_exact_law_target_is_the_largest_valid_rank(p):
    n, eps, c, level = 800, 1.0, 127.0, 0.02
    k = expmech_lower_target_exact(n, eps, c, level, p)
    assert _brute_exact_failure(n, eps, c, k, p) <= level
    assert _brute_exact_failure(n, eps, c, k + 1, p) > level * (1 - 1e-9)
    assert k >= expmech_lower_target(n, eps, c, level, p)  # the same or closer to n·p


def _offset_tail(cells, k, eps, grid, t):
    """P(|j − k| ≥ t) for the drawn piece j of the cell mechanism (exact law)."""
    q = float(grid.per_theta)
    law = order_statistic_law(cells, k, eps, (0.0, float(grid.n_cells)), q, q + 1.0)
    j = np.arange(cells.size + 1)
    return float(law.piece_probabilities[np.abs(j - k) >= t].sum())


def test_exact_law_tail_is_attained_by_a_clump():
    # Attacker: ranks 1..k+t on the bottom cell, the rest on the top cell. The score-0
    # band is then Q+1 cells and every other cell is at offset exactly t, so the draw's
    # law attains x_t/(1 + x_t): the bound used for the ranks cannot be lowered.
    n, k, eps = 40, 12, 1.1
    grid = CellGrid.for_bounds((0.0, 1.0), 1.0 / 32)
    c = grid.tail_constant
    for t in (1, 3, 6, 10):
        cells = np.where(np.arange(n) < k + t, 0.0, float(grid.n_cells - 1))
        x = c * math.exp(-eps * t / 2.0)
        assert _offset_tail(cells, k, eps, grid, t) == pytest.approx(x / (1 + x), rel=1e-9)


def test_exact_law_tail_bounds_every_data_set():
    rng = np.random.default_rng(5)
    n, eps = 30, 0.9
    grid = CellGrid.for_bounds((0.0, 1.0), 1.0 / 16)
    c = grid.tail_constant
    for trial in range(60):
        if trial % 3 == 0:  # ties and atoms
            values = rng.choice([0.0, 0.3, 0.31, 1.0], n)
        elif trial % 3 == 1:
            values = rng.uniform(0, 1, n)
        else:
            values = rng.beta(0.2, 0.2, n)
        cells = np.sort(grid.index(values))
        k = int(rng.integers(0, n + 1))
        for t in range(1, n + 1):
            x = c * math.exp(-eps * t / 2.0)
            assert _offset_tail(cells, k, eps, grid, t) <= x / (1 + x) * (1 + 1e-12)


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


def test_certified_search_windows_are_the_recorded_bytes():
    """The certified rank searches' pmf windows (pmf, running sums, Chernoff bound) are
    byte for byte those of the code before the in-place rewrite (digest recorded with
    commit a9411e1, which also predates the one-point log-pmf path)."""
    import hashlib

    from dpfair.quantiles import _methods

    h = hashlib.sha256()
    for n in (1, 7, 333, 12345, 10**6 + 17):
        for p in (0.5, 0.1, 0.9, 0.01):
            for half in (2, 3002, 20000):
                lo, hi, pmf, cdf, out = _methods._window_sums.__wrapped__(n, p, half)
                h.update(repr((lo, hi, float(out).hex())).encode())
                h.update(pmf.tobytes())
                h.update(cdf.tobytes())
    assert h.hexdigest() == "ae06f751b12a147c497bf65f13462f422e584f9cc8d2c45041c47eaa880fff36"

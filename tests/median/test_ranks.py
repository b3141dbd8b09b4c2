"""Target ranks: the O(n) factorised search must equal the O(n²) definition."""

import numpy as np
import pytest
from scipy import stats

from dpfair import InsufficientDataError
from dpfair.median import expmech_target_ranks, nonprivate_ranks
from dpfair.median._ranks import (
    expmech_lower_failure,
    expmech_lower_target,
    gaussian_union_tail,
    generic_lower_failure,
)


def brute_failure(n, k, tail):
    m = np.arange(k + 1, n + 1)
    return stats.binom.cdf(k, n, 0.5) + np.sum(stats.binom.pmf(m, n, 0.5) * tail(m - k))


@pytest.mark.parametrize("n", [1, 2, 7, 50, 333, 1000])
@pytest.mark.parametrize(("eps", "ratio"), [(0.2, 4000.0), (1.41, 3999.0), (5.0, 0.5), (30.0, 1e6)])
def test_factorised_expmech_failure_equals_definition(n, eps, ratio):
    ks = np.arange(0, n + 1)
    fast = expmech_lower_failure(n, eps, ratio, ks)

    def tail(t):
        return np.minimum(1.0, ratio * np.exp(-eps * t / 2.0))

    slow = np.array([brute_failure(n, k, tail) for k in ks])
    np.testing.assert_allclose(fast, np.minimum(slow, 1.0), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("n", [50, 1000, 12345])
@pytest.mark.parametrize("eps", [0.05, 0.63, 1.41, 4.0])
def test_expmech_target_is_largest_valid_rank(n, eps):
    ratio = 3999.0
    k = expmech_lower_target(n, eps, ratio, 0.025)
    if k < 0:
        assert expmech_lower_failure(n, eps, ratio, [0])[0] > 0.025
        return
    f = expmech_lower_failure(n, eps, ratio, [k, k + 1])
    assert f[0] <= 0.025
    assert f[1] > 0.025 * (1 - 1e-9)


def test_generic_failure_equals_definition():
    tail = gaussian_union_tail(sigma=4.0, n_queries=9)
    for n, k in [(50, 10), (1000, 460), (1000, 470)]:
        assert generic_lower_failure(n, tail, k, t_max=200) == pytest.approx(
            brute_failure(n, k, tail), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("n", [6, 7, 10, 50, 1000, 10_001])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
def test_nonprivate_ranks_exact(n, alpha):
    if 2.0**-n > alpha / 2:
        with pytest.raises(InsufficientDataError, match=f"n={n}"):
            nonprivate_ranks(n, alpha)
        return
    k_low, k_high = nonprivate_ranks(n, alpha)
    # P(med < x_(k)) = P(B ≤ k − 1): largest k with this ≤ α/2
    assert stats.binom.cdf(k_low - 1, n, 0.5) <= alpha / 2
    assert stats.binom.cdf(k_low, n, 0.5) > alpha / 2
    assert k_high == n + 1 - k_low
    assert stats.binom.sf(k_high - 1, n, 0.5) <= alpha / 2  # P(B ≥ k_high)


def test_expmech_ranks_one_below_classical_without_noise():
    # ε huge, θ = |R|/2 ⇒ tail ≈ 0 beyond t0 = 0: the target is the classical rank − 1
    k_low, k_high, _ = expmech_target_ranks(1000, 1e4, 0.05, 1.0, 0.5)
    np_low, np_high = nonprivate_ranks(1000, 0.05)
    assert (k_low, k_high) == (np_low - 1, np_high)


def test_expmech_ranks_symmetric_and_too_small_n():
    k_low, k_high, _ = expmech_target_ranks(1001, 1.41, 0.05, 20.0, 0.005)
    assert k_low + k_high == 1001
    with pytest.raises(InsufficientDataError, match="n=50"):
        expmech_target_ranks(50, 0.2, 0.05, 20.0, 0.005)

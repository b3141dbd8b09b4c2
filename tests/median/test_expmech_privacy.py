"""Exact ε-DP of the ExpMech order-statistic mechanism, by density ratios on neighbours."""

import numpy as np
import pytest

from dpfair.median import order_statistic_law

BOUNDS = (-5.0, 15.0)


def _prepared(x):
    return np.sort(np.clip(np.asarray(x, dtype=float), *BOUNDS))


def max_log_ratio(x, x_prime, k, eps, theta):
    p = order_statistic_law(_prepared(x), k, eps, BOUNDS, theta)
    q = order_statistic_law(_prepared(x_prime), k, eps, BOUNDS, theta)
    pts = np.unique(np.concatenate((p.edges, q.edges)))
    # every breakpoint of both densities and the midpoint of every piece of their union
    t = np.concatenate((pts, 0.5 * (pts[:-1] + pts[1:])))
    lp, lq = p.logpdf(t), q.logpdf(t)
    assert np.all(np.isfinite(lp)) and np.all(np.isfinite(lq))  # full support on R
    return float(np.max(np.abs(lp - lq)))


def neighbour_cases():
    rng = np.random.default_rng(0)
    x = rng.lognormal(np.log(1.5), 1.0, 40)
    yield "random", x, np.where(np.arange(40) == 3, 14.0, x)
    ties = np.repeat([0.0, 1.0, 2.0], 10)
    yield "ties", ties, np.where(np.arange(30) == 15, 0.0, ties)
    same = np.full(25, 3.0)
    yield "all-equal", same, np.where(np.arange(25) == 0, -5.0, same)
    onb = np.concatenate((np.full(10, -5.0), np.full(10, 15.0)))
    yield "on-bounds", onb, np.where(np.arange(20) == 0, 15.0, onb)
    yield "outside-range", np.array([-100.0, 0.0, 1.0, 2.0]), np.array([200.0, 0.0, 1.0, 2.0])
    yield "n=1", np.array([0.0]), np.array([15.0])
    yield "n=2", np.array([1.0, 1.0]), np.array([1.0, -5.0])
    yield "close-points", np.array([0.0, 0.001, 0.002, 0.003]), np.array([0.0, 0.001, 0.002, 9.0])


@pytest.mark.parametrize(("name", "x", "x_prime"), list(neighbour_cases()))
@pytest.mark.parametrize("eps", [0.1, 1.41, 20.0])
@pytest.mark.parametrize("theta", [0.005, 0.5])
def test_density_ratio_never_exceeds_e_eps(name, x, x_prime, eps, theta):
    for k in sorted({0, len(x) // 2, len(x)}):
        assert max_log_ratio(x, x_prime, k, eps, theta) <= eps * (1 + 1e-12) + 1e-12, name


def test_check_has_power_against_a_mis_scaled_mechanism():
    """The same check flags a mechanism that forgets the factor 1/2 in exp(ε·s/2)."""
    rng = np.random.default_rng(0)
    x = rng.lognormal(np.log(1.5), 1.0, 40)
    x_prime = np.where(np.arange(40) == 3, 14.0, x)
    eps = 1.0
    assert max_log_ratio(x, x_prime, 30, 2 * eps, 0.005) > eps * 1.2


def test_random_neighbours_many():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        x = np.round(rng.normal(2, 4, n), 1)  # rounding makes ties common
        xp = x.copy()
        xp[rng.integers(n)] = np.round(rng.uniform(-8, 18), 1)
        k = int(rng.integers(0, n + 1))
        eps = float(rng.uniform(0.05, 5))
        assert max_log_ratio(x, xp, k, eps, 0.05) <= eps * (1 + 1e-12) + 1e-12

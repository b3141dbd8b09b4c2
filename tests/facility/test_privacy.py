"""Exact ε-DP of DPExpMed and the baselines, by density ratios on neighbouring data sets.

Replace-one neighbours (n fixed). For the piecewise-constant law of DPExpMed the log-density
ratio is evaluated at every breakpoint of both densities and at the midpoint of every piece
of their common refinement, so every piece of both densities is checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfair.facility import (
    DPExpMed,
    GridExpMed,
    LaplaceMedian,
    fair_lower_bound_pair,
    impossibility_pair,
    spm_lower_bound_pair,
    widened_loss,
)
from tests.facility._helpers import DOMAIN, max_log_ratio

EPSILONS = (0.1, 1.0, 20.0, 50.0)
WIDENINGS = (None, 0.0, 0.01, 0.3, 2.0)
TOL = 1e-12


def neighbour_cases():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 1.0, 41)
    yield "random", x, np.where(np.arange(41) == 3, 0.999, x)
    ties = np.repeat([0.2, 0.5, 0.7], 10)
    yield "ties", ties, np.where(np.arange(30) == 15, 0.2, ties)
    same = np.full(25, 0.3)
    yield "all-at-one-point", same, np.where(np.arange(25) == 0, 0.0, same)
    onb = np.concatenate((np.full(10, 0.0), np.full(10, 1.0)))
    yield "on-boundary", onb, np.where(np.arange(20) == 0, 1.0, onb)
    for n in (5, 6):
        pair = impossibility_pair(n, DOMAIN)
        yield f"impossibility-n={n}", pair.first, pair.second
    yield "n=1", np.array([0.2]), np.array([0.9])
    yield "n=1-ends", np.array([0.0]), np.array([1.0])
    yield "n=2", np.array([0.5, 0.5]), np.array([0.5, 0.0])
    yield "n=2-ends", np.array([0.0, 1.0]), np.array([1.0, 1.0])
    yield "close-points", np.array([0.4, 0.4001, 0.4002, 0.4003]), np.array(
        [0.4, 0.4001, 0.4002, 0.99]
    )
    pair = spm_lower_bound_pair(41, 0.15, DOMAIN)
    yield "D1/D2", pair.first, pair.second


CASES = list(neighbour_cases())


@pytest.mark.parametrize(("name", "x", "x_prime"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("median", ["lower", "upper"])
def test_dpexpmed_density_ratio_never_exceeds_e_eps(name, x, x_prime, median):
    for eps in EPSILONS:
        for w in WIDENINGS:
            mech = DPExpMed(eps, DOMAIN, widening=w, median=median)
            ratio = max_log_ratio(mech.distribution(x), mech.distribution(x_prime))
            assert ratio <= eps * (1 + TOL) + TOL, (name, eps, w, ratio)


def test_random_neighbours_many():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        x = np.round(rng.uniform(0, 1, n), 1)  # rounding makes ties common
        xp = x.copy()
        xp[rng.integers(n)] = np.round(rng.uniform(0, 1), 1)
        eps = float(rng.uniform(0.05, 10))
        w = [None, 0.0, float(rng.uniform(0, 0.5))][int(rng.integers(3))]
        mech = DPExpMed(eps, DOMAIN, widening=w, median=["lower", "upper"][int(rng.integers(2))])
        assert max_log_ratio(mech.distribution(x), mech.distribution(xp)) <= eps * (1 + TOL) + TOL


def test_the_check_has_power_against_a_mis_scaled_mechanism():
    """The same check flags a mechanism that forgets the 1/2 in exp(−ε p/2) (i.e. 2ε)."""
    _, x, x_prime = CASES[0]  # "random": one agent moved from inside to the far right
    eps = 1.0
    mech = DPExpMed(2 * eps, DOMAIN, widening=0.0)
    assert max_log_ratio(mech.distribution(x), mech.distribution(x_prime)) > 1.2 * eps


def test_widened_loss_has_sensitivity_one_on_neighbours():
    """Lemma 7.6: |p_α(D, ℓ) − p_α(D', ℓ)| ≤ 1 at every location (definition, not formula)."""
    rng = np.random.default_rng(2)
    for _ in range(60):
        n = int(rng.integers(1, 15))
        x = np.round(rng.uniform(0, 1, n), 1)
        xp = x.copy()
        xp[rng.integers(n)] = np.round(rng.uniform(0, 1), 1)
        alpha = float(rng.choice([0.0, 0.05, 0.2]))
        locs = np.unique(np.concatenate((np.linspace(0, 1, 41), x, xp, x + alpha, x - alpha)))
        locs = locs[(locs >= 0) & (locs <= 1)]
        for med in ("lower", "upper"):
            p = widened_loss(x, locs, widening=alpha, domain=DOMAIN, median=med,
                             method="definition")
            q = widened_loss(xp, locs, widening=alpha, domain=DOMAIN, median=med,
                             method="definition")
            assert np.max(np.abs(p - q)) <= 1


def test_lower_bound_pairs_are_neighbours_as_computed():
    assert impossibility_pair(7, DOMAIN).distance == 1
    assert spm_lower_bound_pair(41, 0.15, DOMAIN).distance == 1
    pair = fair_lower_bound_pair(21, 3, DOMAIN)
    assert pair.distance == 6  # 2·steps; the paper states steps (see the docstring)
    assert pair.paper_distance == 3


# --------------------------------------------------------------------------- baselines
@pytest.mark.parametrize(("name", "x", "x_prime"), CASES, ids=[c[0] for c in CASES])
def test_laplace_baseline_is_eps_dp(name, x, x_prime):
    """Exact pmf ratio of the executed (discrete, gridded) law: at every grid point near
    the data, the medians and a sweep of the domain (default grid), and at every point of
    a coarse grid (2^8 steps); atoms at the ends included."""
    for eps in EPSILONS:
        for bits in (32, 8):
            mech = LaplaceMedian(eps, DOMAIN, grid_bits=bits)
            p, q = mech.distribution(x), mech.distribution(x_prime)
            if bits == 8:
                j = np.arange(mech.steps + 1)
            else:
                t = np.concatenate((np.linspace(0, 1, 201), x, x_prime, [p.optimum, q.optimum]))
                j = np.unique(np.clip(np.rint(t * mech.steps).astype(np.int64)
                                      + np.arange(-2, 3)[:, None], 0, mech.steps))
            lp, lq = p.law.logpmf_index(j), q.law.logpmf_index(j)
            assert np.all(np.isfinite(lp)) and np.all(np.isfinite(lq))
            assert np.max(np.abs(lp - lq)) <= eps * (1 + TOL) + TOL
            for a, b in ((p.law.atom_lo, q.law.atom_lo), (p.law.atom_hi, q.law.atom_hi)):
                assert abs(np.log(a) - np.log(b)) <= eps * (1 + TOL) + TOL


@pytest.mark.parametrize(("name", "x", "x_prime"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("score", ["rank", "percentile"])
def test_grid_baseline_is_eps_dp(name, x, x_prime, score):
    for eps in EPSILONS:
        mech = GridExpMed(eps, DOMAIN, grid_size=101, score=score)
        p, q = mech.distribution(x), mech.distribution(x_prime)
        ratio = np.max(np.abs(p.law.log_prob - q.law.log_prob))
        assert ratio <= eps * (1 + TOL) + TOL, (name, eps, ratio)

"""Coverage ≥ 1 − α for every method, checked with an exact one-sided binomial test.

Each repetition draws a fresh sample and runs the method once, so the coverage indicators
are i.i.d. Bernoulli(p) with p ≥ 1 − α for a correct method; the count is compared with
the exact binomial quantile at level 1e-6 (tests/_stats.py). The CI size (1,500
repetitions per cell) flags a true coverage of 0.90 with probability > 0.99; the slow
sweep (5,000 per cell, the paper's count) flags 0.925.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from scipy import stats

import dpfair
from tests._stats import min_successes

BOUNDS = (-5.0, 15.0)
ALPHA = 0.05

# name -> (frozen scipy law, population median)
DESIGNS = {
    "lognormal-sigma1": stats.lognorm(s=1.0, scale=1.5),
    "lognormal-sigma5": stats.lognorm(s=5.0, scale=1.5),
    "normal": stats.norm(loc=3.0, scale=2.0),
    "uniform": stats.uniform(loc=0.0, scale=10.0),
    "pareto-heavy": stats.pareto(b=1.1),  # skewed, infinite variance
    "poisson-ties": stats.poisson(3.5),  # atoms: many ties, median 3 (see _api docstring)
}

# (n, rho) pairs where every method has a valid target rank at alpha = 0.05
SETTINGS = [(50, 1.0), (1000, 0.5)]
CI_REPS = 1500


def _seed(*parts: object) -> int:
    """A stable per-cell seed (Python's hash() is salted per process)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def coverage_count(method, law, n, rho, reps, seed):
    rng = np.random.default_rng(seed)
    med = float(law.median())
    hits = 0
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        r = dpfair.median.confidence_interval(x, rho=rho, bounds=BOUNDS, alpha=ALPHA,
                                              method=method, rng=rng)
        hits += r.low <= med <= r.high
    return hits


@pytest.mark.statistical
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize(("n", "rho"), SETTINGS)
def test_coverage_ci_sized(method, design, n, rho):
    reps = CI_REPS
    hits = coverage_count(method, DESIGNS[design], n, rho, reps,
                          seed=_seed(method, design, n))
    assert hits >= min_successes(reps, 1 - ALPHA), f"coverage {hits / reps:.3f}"


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize(("n", "rho"), [(50, 1.0), (1000, 0.1), (1000, 0.5), (1000, 1.0)])
def test_coverage_full_sweep(method, design, n, rho):
    reps = 5000
    hits = coverage_count(method, DESIGNS[design], n, rho, reps, seed=2024 + n)
    assert hits >= min_successes(reps, 1 - ALPHA), f"coverage {hits / reps:.3f}"


@pytest.mark.statistical
def test_nonprivate_interval_covers():
    law, reps = DESIGNS["lognormal-sigma1"], 2000
    rng = np.random.default_rng(3)
    count = 0
    for _ in range(reps):
        ci = dpfair.median.nonprivate_interval(law.rvs(size=200, random_state=rng))
        count += ci.low <= 1.5 <= ci.high
    assert count >= min_successes(reps, 1 - ALPHA)


def test_binomial_acceptance_bound_has_power():
    """The acceptance rules reject a 0.90 (CI) / 0.925 (slow) coverage w.p. > 0.99."""
    assert stats.binom.cdf(min_successes(CI_REPS, 0.95) - 1, CI_REPS, 0.90) > 0.99
    assert stats.binom.cdf(min_successes(5000, 0.95) - 1, 5000, 0.925) > 0.99

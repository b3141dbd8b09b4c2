"""Coverage ≥ 1 − α for any quantile, checked with exact one-sided binomial bounds.

Each repetition draws a fresh sample and runs the method once, so the coverage indicators
are i.i.d. Bernoulli(c) with c ≥ 1 − α for a correct method; the count is compared with
the exact binomial bound at level 1e-6 (tests/_stats.py: a correct method fails w.p.
< 1e-6). Designs: a skewed continuous law, a heavy tail (Pareto 1.1, infinite variance)
a Cauchy (no mean; data far outside the bounds, clipped) and atoms (Poisson: many ties,
x_q on an atom), at q = 0.1, 0.5 and 0.9, in the default (localised) mode and in the
paper's mode, and at n = 50 (where some ends have no valid rank and sit on a bound). The
default suite is small (it flags a true coverage of 0.80); ``-m slow`` runs the full size
(1,500 repetitions per cell: a true coverage of 0.90 fails it almost surely).
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
DESIGNS = {
    "lognormal": stats.lognorm(s=1.0, scale=1.5),
    "pareto-heavy": stats.pareto(b=1.1),
    "cauchy": stats.cauchy(loc=2.0),
    "poisson-ties": stats.poisson(3.5),
}
QS = [0.1, 0.5, 0.9]


def _seed(*parts: object) -> int:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _coverage(law, q, n, rho, method, localize, reps, seed):
    rng = np.random.default_rng(seed)
    truth = float(law.ppf(q))
    hits = 0
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        r = dpfair.quantiles.confidence_interval(
            x, q, rho=rho, bounds=BOUNDS, alpha=ALPHA, method=method, localize=localize,
            rng=rng)
        hits += r.low <= truth <= r.high
    return hits


@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("q", QS)
def test_coverage_default(method, design, q):
    reps = 120
    hits = _coverage(DESIGNS[design], q, 300, 0.5, method, None, reps,
                     _seed("default", method, design, q))
    assert hits >= min_successes(reps, 1 - ALPHA)


@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("design", ["lognormal", "poisson-ties"])
@pytest.mark.parametrize("q", QS)
def test_coverage_small_n(method, design, q):
    reps = 120
    hits = _coverage(DESIGNS[design], q, 50, 0.5, method, None, reps,
                     _seed("small", method, design, q))
    assert hits >= min_successes(reps, 1 - ALPHA)


@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("q", [0.1, 0.9])
def test_coverage_paper_mode(method, q):
    reps = 120
    hits = _coverage(DESIGNS["lognormal"], q, 300, 0.5, method, False, reps,
                     _seed("paper", method, q))
    assert hits >= min_successes(reps, 1 - ALPHA)


@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", ["cdf", "expmech"])
def test_simultaneous_coverage(method):
    law = DESIGNS["lognormal"]
    qs = [0.1, 0.25, 0.5, 0.75, 0.9]
    truth = law.ppf(qs)
    rng = np.random.default_rng(_seed("family", method))
    reps, hits = 120, 0
    for _ in range(reps):
        x = law.rvs(size=400, random_state=rng)
        res = dpfair.quantiles.confidence_intervals(x, qs, rho=0.5, bounds=BOUNDS,
                                                    method=method, rng=rng)
        hits += all(iv.low <= t <= iv.high for iv, t in zip(res, truth, strict=True))
    assert hits >= min_successes(reps, 1 - ALPHA)


@pytest.mark.statistical
@pytest.mark.parametrize("design", ["lognormal", "poisson-ties"])
def test_cdf_band_coverage(design):
    law = DESIGNS[design]
    rng = np.random.default_rng(_seed("band", design))
    reps, hits = 150, 0
    for _ in range(reps):
        x = law.rvs(size=500, random_state=rng)
        b = dpfair.quantiles.cdf_band(x, rho=0.5, bounds=BOUNDS, rng=rng)
        true_cdf = law.cdf(b.grid)
        true_cdf[-1] = 1.0  # data are clipped into the bounds
        hits += b.contains(true_cdf)
    assert hits >= min_successes(reps, 1 - ALPHA)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("q", QS)
@pytest.mark.parametrize(("n", "rho"), [(50, 0.5), (100, 1.0), (1000, 0.5)])
def test_coverage_full(method, design, q, n, rho):
    reps = 1500
    hits = _coverage(DESIGNS[design], q, n, rho, method, None, reps,
                     _seed("full", method, design, q, n))
    assert hits >= min_successes(reps, 1 - ALPHA)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", dpfair.median.METHODS)
@pytest.mark.parametrize("q", QS)
def test_coverage_wide_bounds_large_n(method, q):
    # Gamma(2), n = 1e5, public bounds +-1e6: nearly all of the localised design's slack is
    # gone (fine bins, the binomial dominates), so coverage sits close to nominal here.
    law = stats.gamma(a=2.0)
    rng = np.random.default_rng(_seed("wide", method, q))
    truth = float(law.ppf(q))
    reps, hits = 1500, 0
    for _ in range(reps):
        x = law.rvs(size=100_000, random_state=rng)
        r = dpfair.quantiles.confidence_interval(x, q, rho=0.5, bounds=(-1e6, 1e6),
                                                 method=method, rng=rng)
        hits += r.low <= truth <= r.high
    assert hits >= min_successes(reps, 1 - ALPHA)

"""release_cdf_tree: one noisy tree, many quantile queries (post-processing only)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidParameterError
from dpfair.mechanisms import leaf_counts
from dpfair.median._cdf import cdf_interval, mixture_sf, release_cdf_tree
from tests._quantile_reference import bracketing_threshold
from tests._stats import min_successes

BOUNDS = (-5.0, 15.0)


def _leaves(x, depth=9):
    return leaf_counts(np.clip(x, *BOUNDS), BOUNDS, depth)


def test_median_query_is_cdf_interval(seed):
    x = np.random.default_rng(seed).lognormal(np.log(1.5), 1.0, 2000)
    g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
    low, high, spent, diag, cdf = cdf_interval(_leaves(x), 0.5, BOUNDS, 0.05, 9, g1)
    rel = release_cdf_tree(_leaves(x), 0.5, BOUNDS, 9, g2)
    assert rel.interval(0.5, 0.05)[:2] == (low, high)
    assert rel.interval(0.5, 0.05)[2] == diag
    assert rel.spent == spent
    assert np.array_equal(rel.cdf.values, cdf.values)
    assert g1.random() == g2.random()


def test_queries_cost_nothing_and_draw_nothing(seed):
    x = np.random.default_rng(seed).lognormal(np.log(1.5), 1.0, 2000)
    g = np.random.default_rng(seed)
    rel = release_cdf_tree(_leaves(x), 0.5, BOUNDS, 9, g)
    state = g.bit_generator.state
    ends = [rel.interval(q, 0.01)[:2] for q in (0.1, 0.25, 0.5, 0.75, 0.9)]
    assert g.bit_generator.state == state  # post-processing: no randomness, no budget
    assert rel.spent.rho == pytest.approx(0.5)
    lows = [lo for lo, _ in ends]
    highs = [hi for _, hi in ends]
    assert lows == sorted(lows) and highs == sorted(highs)  # monotone in q
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        lo, hi, _ = rel.interval(q, 0.01)
        assert lo <= np.quantile(x, q) <= hi  # far from a boundary case at n = 2000


def test_bad_q():
    rel = release_cdf_tree(_leaves(np.zeros(100)), 0.5, BOUNDS, 9, np.random.default_rng(0))
    for q in (0.0, 1.0, -0.1, float("nan")):
        with pytest.raises(InvalidParameterError, match="q="):
            rel.interval(q, 0.05)


def test_mixture_with_p_matches_direct_sum():
    n, sigma = 300, 2.5
    c = np.array([20.0, 28.5, 33.0, 290.0])
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, 0.1)
    direct = np.array([(pmf * stats.norm.sf((ci - k) / sigma)).sum() for ci in c])
    np.testing.assert_allclose(mixture_sf(c, sigma, n, p=0.1), direct, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("q", [0.1, 0.9])
@pytest.mark.parametrize("design", ["lognormal", "atoms"])
def test_quantile_coverage_exact_bound(q, design, seed):
    """Each end misses w.p. ≤ α/2; test coverage ≥ 1 − α with an exact 1e-6 bound."""
    rng = np.random.default_rng(seed + 100)
    trials, n, alpha = 600, 400, 0.2
    if design == "lognormal":
        truth = float(stats.lognorm(1.0, scale=1.5).ppf(q))
    else:
        truth = 2.0 if q == 0.1 else 4.0
    covered = 0
    for _ in range(trials):
        if design == "lognormal":
            x = rng.lognormal(np.log(1.5), 1.0, n)
        else:  # atoms at 2 (mass .4) and 4 (mass .6): Q_0.1 = 2, Q_0.9 = 4
            x = np.where(rng.random(n) < 0.4, 2.0, 4.0)
        rel = release_cdf_tree(_leaves(x, 7), 1.0, BOUNDS, 7, rng)
        lo, hi, _ = rel.interval(q, alpha)
        covered += lo <= truth <= hi
    assert covered >= min_successes(trials, 1.0 - alpha)


@pytest.mark.parametrize("n", [50, 1000, 10**5, 10**7])
@pytest.mark.parametrize(("s_min", "s_max"), [(1.0, 3.0), (10.0, 30.0)])
@pytest.mark.parametrize("level", [0.005, 0.1])
@pytest.mark.parametrize("p", [0.5, 0.1])
def test_envelope_threshold_keeps_its_level(n, s_min, s_max, level, p):
    """The returned a satisfies E_B[q_env(B, a)] ≤ level as evaluated (not only ≈ root)."""
    from dpfair.median._cdf import _envelope_threshold

    a = _envelope_threshold(n, s_min, s_max, level, p)
    sf = mixture_sf(np.array([a]), s_max, n, sigma_above=s_min, p=p)[0]
    assert sf <= level
    assert mixture_sf(np.array([a - 1e-3]), s_max, n, sigma_above=s_min, p=p)[0] > level


@pytest.mark.parametrize("n", [50, 1000, 200_000])
@pytest.mark.parametrize("p", [0.5, 0.1])
@pytest.mark.parametrize(("sigma", "above"), [(4.0, None), (30.0, None), (2.0, 7.0), (7.0, 2.0)])
def test_windowed_mixture_equals_full_window_sum(n, p, sigma, above):
    """The O(50σ) sum per point equals the sum over the whole binomial window (to 1e-13)."""
    from scipy import special

    from dpfair.median._cdf import _binomial_support

    k, pmf, dropped = _binomial_support(n, p)
    c = np.concatenate([np.linspace(n * p - 6 * np.sqrt(n), n * p + 6 * np.sqrt(n), 200),
                        [0.0, float(n), -5.0, n * p + 0.5]])
    up = sigma if above is None else above
    diff = k[None, :] - c[:, None]
    scale = np.where(diff > 0, up, sigma)
    full = np.minimum((special.ndtr(diff / scale) * pmf).sum(axis=1) + dropped, 1.0)
    got = mixture_sf(c, sigma, n, sigma_above=above, p=p)
    np.testing.assert_allclose(got, full, rtol=0, atol=1e-13)


@pytest.mark.parametrize(("n", "p"), [(1, 0.5), (10, 0.5), (300, 0.01), (1000, 0.1),
                                      (5000, 0.37), (20000, 0.5)])
def test_window_pmf_is_an_upper_bound_of_the_exact_pmf(n, p):
    # The mixture tests' binomial pmf (no scipy.stats) must never be below the exact
    # P(B = k) (exact rational arithmetic on the binary64 p), and close to it.
    import math
    from fractions import Fraction

    from dpfair.median._cdf import _binomial_support

    k, pmf, _ = _binomial_support(n, p)
    big_p = Fraction(p)
    for i in range(0, k.size, max(1, k.size // 50)):
        kk = int(k[i])
        exact = math.comb(n, kk) * big_p**kk * (1 - big_p) ** (n - kk)
        rel = Fraction(float(pmf[i])) / exact - 1
        assert 0 <= rel < 1e-11


def test_root_finder_brackets_the_envelope_root():
    from dpfair.median._cdf import _bracket_root, _envelope_threshold

    root = _bracket_root(lambda a: 3.0 - a, -10.0, 50.0)
    assert 3.0 <= root <= 3.0 + 2e-10
    a = _envelope_threshold(1000, 2.0, 4.0, 0.02, 0.5)
    level = mixture_sf(np.array([a]), 4.0, 1000, sigma_above=2.0, p=0.5)[0]
    assert level <= 0.02
    below = mixture_sf(np.array([a - 1e-6]), 4.0, 1000, sigma_above=2.0, p=0.5)[0]
    assert below > 0.02 * (1 - 1e-6)


@pytest.mark.parametrize("n", [1, 7, 333, 12_345, 10**6 + 18, 10**7])
@pytest.mark.parametrize(("s_min", "s_max"), [(0.5, 0.6), (4.0, 4.001), (9.7, 14.3),
                                              (200.0, 260.0)])
@pytest.mark.parametrize("level", [1e-12, 1e-6, 0.012, 0.4])
@pytest.mark.parametrize("p", [0.5, 0.1, 0.9, 0.37])
def test_newton_threshold_is_valid_and_within_the_bracketing_tolerance(n, s_min, s_max,
                                                                       level, p):
    """The Newton-searched threshold keeps its level (as evaluated by mixture_sf) and lies
    within the former search's tolerance of the former threshold.

    The former threshold was the upper end of a bracket of width ≤ 1e-10 + 1e-14·|a|
    around the root, + 1e-9 (+ step-ups when that failed the check); the new one is the
    root to about an ulp, + 1e-9 (rounded up), checked the same way. So, both being valid
    (≥ the root as evaluated), the new one is never above the former by more than a few
    ulps and never below it by more than the former tolerance. Released intervals change
    only if a noisy prefix count falls between the two (recorded seeded intervals:
    unchanged).
    """
    from dpfair.median._cdf import _envelope_threshold

    new = _envelope_threshold.__wrapped__(n, s_min, s_max, level, p)
    old = bracketing_threshold(n, s_min, s_max, level, p)
    assert mixture_sf(np.array([new]), s_max, n, sigma_above=s_min, p=p)[0] <= level
    ulp = np.spacing(abs(old))
    assert old - (1e-10 + 1e-14 * abs(old)) - 2 * ulp <= new <= old + 4 * ulp


def test_one_point_mixture_sf_is_the_general_path_bit_for_bit():
    """mixture_sf at one point with scalar noise levels (the envelope thresholds' check)
    takes a short path; it must return the general (broadcasting, blocked) path's value
    exactly, which a one-element sigma array forces."""
    import math

    rng = np.random.default_rng(5)
    for n in [1, 2, 7, 50, 333, 12345, 10**6 + 17]:
        for p in (0.5, 0.1, 0.9, 0.01):
            for _ in range(20):
                s1 = float(np.exp(rng.uniform(np.log(0.3), np.log(300))))
                s2 = None if rng.random() < 0.3 else float(
                    np.exp(rng.uniform(np.log(0.3), np.log(300))))
                sd = math.sqrt(n * p * (1 - p)) + 1
                c = float(n * p + rng.normal() * sd * rng.choice([1, 5, 20, 100]))
                if rng.random() < 0.1:
                    c = float(rng.choice([-1e9, 1e12, 0.0, float(n)]))
                fast = mixture_sf(np.array([c]), s1, n, sigma_above=s2, p=p)
                general = mixture_sf(np.array([c]), np.array([s1]), n, p=p,
                                     sigma_above=None if s2 is None else np.array([s2]))
                assert fast.shape == (1,)
                assert fast.tobytes() == general.tobytes(), (n, p, s1, s2, c)


def test_envelope_threshold_below_the_dropped_mass_never_rejects():
    """A level below the binomial window's dropped mass (< 4e-22, added to every mixture
    tail) has no threshold: the envelope test never rejects (the search used to step up
    forever, hanging e.g. alpha=1e-22 on the localised tree methods)."""
    import warnings

    from dpfair import quantiles
    from dpfair.median._cdf import _binomial_support, _envelope_threshold

    dropped = _binomial_support(10_000, 0.5)[2]
    assert dropped > 0.0
    assert _envelope_threshold(10_000, 2.0, 3.0, dropped / 10.0, 0.5) == np.inf
    x = np.random.default_rng(0).lognormal(0.0, 1.0, 5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=BOUNDS, alpha=1e-22,
                                          method="cdf", rng=1)
    assert r.low <= np.median(x) <= r.high

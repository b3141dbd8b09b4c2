"""The fast sampler draws exactly from the exact law (seeded KS tests at level 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfair import BudgetExceededError
from dpfair.facility import DPExpMed, impossibility_pair, triangular_law
from dpfair.facility._mechanism import _sample_windowed
from dpfair.privacy import Accountant, Budget
from tests._stats import FAIL_PROB
from tests.facility._helpers import DOMAIN


def _datasets():
    rng = np.random.default_rng(7)
    yield "uniform-1001", rng.uniform(0, 1, 1001), 1.0, None, "lower"
    yield "triangular-500-even-upper", triangular_law(DOMAIN, peak=0.3).sample(500, rng), 0.5, \
        None, "upper"
    pair = impossibility_pair(11, DOMAIN)
    yield "bimodal", pair.first, 0.5, None, "lower"
    yield "ties", np.repeat([0.1, 0.5, 0.52, 0.9], 25), 2.0, 0.01, "lower"
    yield "unwidened", rng.uniform(0.2, 0.6, 301), 1.0, 0.0, "lower"
    yield "n=1", np.array([0.7]), 0.3, None, "lower"


DATASETS = list(_datasets())


@pytest.mark.statistical
@pytest.mark.parametrize(("name", "x", "eps", "w", "median"), DATASETS,
                         ids=[d[0] for d in DATASETS])
def test_vectorised_draws_match_exact_cdf(name, x, eps, w, median, seed):
    """KS at level 1e-6: a correct sampler fails with probability < 1e-6."""
    mech = DPExpMed(eps, DOMAIN, widening=w, median=median)
    draws = mech.sample(x, rng=seed, size=20_000)
    assert draws.shape == (20_000,)
    assert np.all((draws >= 0) & (draws <= 1))
    assert stats.kstest(draws, mech.distribution(x).cdf).pvalue > FAIL_PROB


@pytest.mark.statistical
@pytest.mark.parametrize(("name", "x", "eps", "w", "median"), DATASETS[:3],
                         ids=[d[0] for d in DATASETS[:3]])
def test_single_draws_match_exact_cdf(name, x, eps, w, median, seed):
    mech = DPExpMed(eps, DOMAIN, widening=w, median=median)
    gen = np.random.default_rng(seed)
    draws = np.array([mech.sample(x, rng=gen) for _ in range(3000)])
    assert stats.kstest(draws, mech.distribution(x).cdf).pvalue > FAIL_PROB


@pytest.mark.statistical
@pytest.mark.parametrize("half_width", [0, 1, 3])
@pytest.mark.parametrize("size", [1, 4000])
def test_fallback_branch_is_exact(half_width, size, seed):
    """A tiny window makes the rare 'outside the window' branch frequent; still exact."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(0, 1, 60), 2)
    eps, alpha = 0.4, 0.02
    law = DPExpMed(eps, DOMAIN, widening=alpha).distribution(x)
    gen = np.random.default_rng(seed + 1)
    if size == 1:
        draws = np.concatenate([
            _sample_windowed(x.copy(), epsilon=eps, domain=DOMAIN, alpha=alpha, k=30, size=1,
                             rng=gen, half_width=half_width)
            for _ in range(3000)
        ])
    else:
        draws = _sample_windowed(x.copy(), epsilon=eps, domain=DOMAIN, alpha=alpha, k=30,
                                 size=size, rng=gen, half_width=half_width)
    assert stats.kstest(draws, law.cdf).pvalue > FAIL_PROB


def test_seed_reproducibility_and_input_untouched():
    x = np.random.default_rng(0).uniform(0, 1, 999)
    before = x.copy()
    mech = DPExpMed(1.0, DOMAIN)
    assert mech.sample(x, rng=5) == mech.sample(x, rng=5)
    np.testing.assert_array_equal(mech.sample(x, rng=5, size=7), mech.sample(x, rng=5, size=7))
    np.testing.assert_array_equal(x, before)
    assert isinstance(mech.sample(x, rng=1), float)
    assert mech.sample(x, rng=1, size=0).shape == (0,)


def test_large_epsilon_and_large_n_stay_exact_and_in_band():
    """ε = 50 at n = 10^6: log-space keeps everything finite; draws sit in the loss-0 band."""
    x = np.random.default_rng(1).uniform(0, 1, 10**6)
    mech = DPExpMed(50.0, DOMAIN)
    t = float(np.median(x))  # n even: lower/upper medians differ by ~1e-6
    draws = mech.sample(x, rng=2, size=200)
    band = 1.0 / (10**6 * 50.0)
    assert np.all(np.abs(draws - t) <= band + 2e-6)
    d = mech.distribution(x)
    assert np.isfinite(d.law.log_norm)
    # ~10 agents (gaps ~1e-6) between T and T ± 1e-5: tail ≈ e^{-300} ≈ 1e-129
    assert 0 < d.fair_sf(1e-5) < 1e-100  # tiny tails are kept, not rounded to 0


def test_accountant_is_charged_before_drawing():
    x = np.linspace(0, 1, 11)
    acct = Accountant(Budget.pure(1.0))
    mech = DPExpMed(0.4, DOMAIN)
    mech.sample(x, rng=0, accountant=acct)
    mech.sample(x, rng=0, accountant=acct)
    with pytest.raises(BudgetExceededError):
        mech.sample(x, rng=0, accountant=acct)
    assert acct.spent.epsilon == pytest.approx(0.8)
    with pytest.raises(BudgetExceededError):
        mech.sample(x, rng=0, size=2, accountant=Accountant(Budget.pure(0.5)))


@pytest.mark.slow
def test_n_ten_million_epsilon_fifty():
    x = triangular_law(DOMAIN).sample(10**7, rng=3)
    mech = DPExpMed(50.0, DOMAIN)
    loc = mech.sample(x, rng=4)
    assert abs(loc - 0.5) < 0.01
    d = mech.distribution(x)
    assert d.fair_quantile(0.99) < 1e-6

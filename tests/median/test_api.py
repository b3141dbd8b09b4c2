"""Public API of dpfair.median: results, accounting, reproducibility, validation."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import dpfair
from dpfair import InsufficientDataError, InvalidDataError, InvalidParameterError
from dpfair.median import MedianInterval, confidence_interval, nonprivate_interval

BOUNDS = (-5.0, 15.0)


@pytest.fixture(scope="module")
def sample():
    return np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 1000)


@pytest.mark.parametrize("method", dpfair.median.METHODS)
def test_result_fields_and_accounting(sample, method):
    r = confidence_interval(sample, rho=0.5, bounds=BOUNDS, method=method, rng=1)
    assert isinstance(r, MedianInterval)
    assert BOUNDS[0] <= r.low < r.high <= BOUNDS[1]
    assert r.estimate == pytest.approx((r.low + r.high) / 2)
    assert r.method == method and r.n == 1000 and r.alpha == 0.05
    assert r.privacy.kind == "zcdp"
    assert r.privacy.rho == pytest.approx(0.5, rel=1e-12)  # the accountant's total is ρ
    d = r.to_dict()
    assert d["privacy"]["rho"] == pytest.approx(0.5)
    import json

    json.dumps(d)  # JSON-ready
    with pytest.raises(AttributeError):
        r.low = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("method", dpfair.median.METHODS)
def test_seeded_reproducible_and_pickles(sample, method):
    a = confidence_interval(sample, rho=0.5, bounds=BOUNDS, method=method, rng=7)
    b = confidence_interval(sample, rho=0.5, bounds=BOUNDS, method=method, rng=7)
    assert (a.low, a.high) == (b.low, b.high)
    c = pickle.loads(pickle.dumps(a))
    assert (c.low, c.high, c.privacy) == (a.low, a.high, a.privacy)


def test_fresh_noise_across_calls_with_a_generator(sample):
    gen = np.random.default_rng(0)
    outs = {confidence_interval(sample, rho=0.5, bounds=BOUNDS, rng=gen).low for _ in range(5)}
    assert len(outs) > 1


def test_input_is_not_modified(sample):
    x = sample.copy()
    x[:5] = [-100.0, 100.0, 20.0, -6.0, 16.0]  # outside the range: clipped on a copy only
    before = x.copy()
    for method in dpfair.median.METHODS:
        confidence_interval(x, rho=0.5, bounds=BOUNDS, method=method, rng=0)
    np.testing.assert_array_equal(x, before)


def test_ledgers_sum_to_rho(sample):
    r = confidence_interval(sample, rho=0.3, bounds=BOUNDS, method="expmech", rng=0)
    assert sum(rho for _, rho in r.diagnostics["ledger"]) == pytest.approx(0.3, rel=1e-12)
    r = confidence_interval(sample, rho=0.3, bounds=BOUNDS, method="cdf", rng=0)
    assert sum(rho for _, rho in r.diagnostics["ledger"]) == pytest.approx(0.3, rel=1e-12)
    r = confidence_interval(sample, rho=0.3, bounds=BOUNDS, method="binsearch", rng=0)
    assert r.diagnostics["n_queries"] == 2 * r.diagnostics["depth"]
    r = confidence_interval(sample, rho=0.3, bounds=BOUNDS, method="binsearch_cdf", rng=0)
    assert r.privacy.rho == pytest.approx(0.3, rel=1e-12)


def test_cdf_method_returns_the_dp_cdf(sample):
    r = confidence_interval(sample, rho=1.0, bounds=BOUNDS, method="cdf", rng=0)
    assert r.cdf is not None
    assert r.cdf.grid.shape == r.cdf.values.shape == r.cdf.std.shape
    assert r.cdf.grid[0] == BOUNDS[0] and r.cdf.grid[-1] == BOUNDS[1]
    # DP CDF close to the empirical one (within 6 exact standard deviations everywhere)
    emp = np.searchsorted(np.sort(sample), r.cdf.grid, side="right") / sample.size
    inner = slice(1, -1)
    assert np.all(np.abs(r.cdf.values[inner] - emp[inner]) <= 6 * r.cdf.std[inner] + 1e-12)
    assert "cdf" in r.to_dict(include_cdf=True)


def test_nonprivate_interval_exact_order_statistics():
    x = np.arange(1.0, 101.0)
    ci = nonprivate_interval(x[::-1], alpha=0.05)
    k_low, k_high = dpfair.median.nonprivate_ranks(100, 0.05)
    assert (ci.low, ci.high) == (float(k_low), float(k_high))
    assert ci.estimate == 50.5


def test_expmech_diagnostics_report_the_ranks(sample):
    r = confidence_interval(sample, rho=0.5, bounds=BOUNDS, rng=0)
    k_low, k_high = r.diagnostics["target_ranks"]
    assert k_low + k_high == 1000
    assert r.diagnostics["epsilon_per_draw"] == pytest.approx(2 * np.sqrt(0.5))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"x": [1.0, np.nan] * 20}, InvalidDataError, "non-finite"),
        ({"x": [1.0, np.inf] * 20}, InvalidDataError, "non-finite"),
        ({"x": []}, InvalidDataError, "empty"),
        ({"x": np.ones((3, 3))}, InvalidDataError, "1-D"),
        ({"bounds": (5.0, 5.0)}, InvalidParameterError, "bounds=.*lo must be strictly"),
        ({"bounds": (5.0, 1.0)}, InvalidParameterError, "bounds="),
        ({"bounds": None}, dpfair.MissingPublicBoundError, "bounds=None: a public range"),
        ({"bounds": (0.0, np.inf)}, InvalidParameterError, "finite"),
        ({"rho": 0.0}, InvalidParameterError, "rho=0.0: must be > 0"),
        ({"rho": -1.0}, InvalidParameterError, "rho="),
        ({"alpha": 0.0}, InvalidParameterError, "alpha=0.0"),
        ({"alpha": 1.0}, InvalidParameterError, "alpha=1.0"),
        ({"method": "laplace"}, InvalidParameterError, "method='laplace'.*expmech"),
        ({"granularity": 0.0}, InvalidParameterError, "granularity"),
        ({"granularity": 10.0}, InvalidParameterError, "granularity=10.0"),
        ({"x": [1.0, 2.0, 3.0]}, InsufficientDataError, "n=3 is too small"),
        ({"rng": -3}, InvalidParameterError, "rng=-3"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, match):
    args = {"x": np.linspace(0, 3, 100), "rho": 0.5, "bounds": BOUNDS, "alpha": 0.05,
            "method": "expmech", "rng": 0}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        confidence_interval(**args)


def test_too_small_for_private_method_but_not_nonprivate():
    x = np.linspace(0, 1, 50)
    nonprivate_interval(x)  # fine
    with pytest.raises(InsufficientDataError, match="ExpMech"):
        confidence_interval(x, rho=0.05, bounds=BOUNDS, method="expmech")


def test_binsearch_cdf_small_n_falls_back_to_cdf():
    # Issue 22: at n = 50, alpha = 0.05, rho = 0.5 the localisation stage has no valid
    # rank (a public fact); binsearch_cdf now skips it and equals method='cdf'.
    x = np.linspace(0, 1, 50)
    a = confidence_interval(x, rho=0.5, bounds=BOUNDS, method="binsearch_cdf", rng=3)
    b = confidence_interval(x, rho=0.5, bounds=BOUNDS, method="cdf", rng=3)
    assert (a.low, a.high) == (b.low, b.high)
    assert a.privacy.rho == pytest.approx(0.5)
    assert "skipped" in a.diagnostics["stage1"]


def test_nonprivate_bad_input():
    with pytest.raises(InvalidParameterError, match="alpha"):
        nonprivate_interval([1.0, 2.0], alpha=2.0)
    with pytest.raises(InvalidDataError, match="non-finite"):
        nonprivate_interval([1.0, np.nan])


def test_huge_range_and_tiny_granularity_do_not_overflow():
    x = np.random.default_rng(1).normal(0, 1, 5000)
    r = confidence_interval(x, rho=0.5, bounds=(-1e12, 1e12), granularity=1e-6, rng=0)
    assert r.low <= 0.0 <= r.high
    with pytest.raises(InvalidParameterError, match="bins"):
        confidence_interval(x, rho=0.5, bounds=(-1e12, 1e12), method="cdf", granularity=1e-6)


@pytest.mark.parametrize("rho", [1e-3, 50.0])
def test_extreme_rho(rho):
    x = np.random.default_rng(2).normal(0, 1, 100_000)
    r = confidence_interval(x, rho=rho, bounds=(-10, 10), rng=0)
    assert r.low <= r.high and np.isfinite(r.low) and np.isfinite(r.high)

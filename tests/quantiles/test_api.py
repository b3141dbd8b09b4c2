"""dpfair.quantiles: the median as the q = 1/2 case, accounting, families, warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpfair
from dpfair import InvalidParameterError
from dpfair.quantiles import QuantileWarning, cdf_band, confidence_interval, confidence_intervals

BOUNDS = (-5.0, 15.0)
METHODS = dpfair.median.METHODS


@pytest.fixture(scope="module")
def sample():
    return np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 600)


@pytest.mark.parametrize("method", METHODS)
def test_median_is_the_half_quantile(sample, method):
    for seed in range(3):
        a = dpfair.median.confidence_interval(sample, rho=0.5, bounds=BOUNDS, method=method,
                                              rng=seed)
        b = confidence_interval(sample, 0.5, rho=0.5, bounds=BOUNDS, method=method,
                                localize=False, rng=seed)
        assert (a.low, a.high) == (b.low, b.high)
        assert a.privacy.rho == pytest.approx(b.privacy.rho, rel=1e-12)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("localize", [False, True])
def test_total_spent_is_rho(sample, method, localize):
    r = confidence_interval(sample, 0.25, rho=0.3, bounds=BOUNDS, method=method,
                            localize=localize, rng=1)
    assert r.privacy.rho == pytest.approx(0.3, rel=1e-9)
    assert r.privacy.rho <= 0.3 * (1 + 1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_localisation_stage_is_charged(sample, method):
    r = confidence_interval(sample, 0.5, rho=0.4, bounds=BOUNDS, method=method, rng=2)
    st = r.diagnostics["stage1"]
    assert st["rho"] == pytest.approx(dpfair.quantiles.LOCALIZE_RHO_FRACTION * 0.4)
    assert r.diagnostics["localize"]["rho"] == pytest.approx(0.04)
    assert r.privacy.rho == pytest.approx(0.4)


def test_ends_use_their_own_binomial(sample):
    # q = 0.1: the lower and upper targets are not mirror images around n/2.
    r = confidence_interval(sample, 0.1, rho=0.5, bounds=BOUNDS, method="expmech",
                            localize=False, rng=0)
    k_low, k_high = r.diagnostics["target_ranks"]
    n = sample.size
    assert k_low < 0.1 * n < k_high
    assert k_low + k_high != n
    # mirror symmetry: q on x equals 1 - q on -x
    lo_np, hi_np = dpfair.quantiles.nonprivate_ranks(n, 0.1, 0.05)
    lo2, hi2 = dpfair.quantiles.nonprivate_ranks(n, 0.9, 0.05)
    assert lo_np + hi2 == n + 1 and hi_np + lo2 == n + 1


def test_family_order_one_tree_and_budget(sample):
    qs = [0.75, 0.1, 0.5]
    res = confidence_intervals(sample, qs, rho=0.5, bounds=BOUNDS, method="cdf", rng=3)
    assert res.qs == tuple(qs)
    assert len(res.intervals) == 3
    assert res.privacy.rho == pytest.approx(0.5)
    assert [lbl for lbl, _ in res.intervals[0].diagnostics["tree"]["ledger"]] == ["cdf/tree"]
    mids = {iv.q: iv.estimate for iv in res}
    assert mids[0.1] < mids[0.5] < mids[0.75]
    # the tree's noise does not depend on how many quantiles are read off it
    one = confidence_intervals(sample, [0.5], rho=0.5, bounds=BOUNDS, method="cdf",
                               localize=False, rng=3)
    many = confidence_intervals(sample, [0.1, 0.5, 0.9], rho=0.5, bounds=BOUNDS,
                                method="cdf", localize=False, rng=3)
    assert (one[0].diagnostics["tree"]["sigma_node"]
            == many[1].diagnostics["tree"]["sigma_node"])


@pytest.mark.parametrize("method", ["expmech", "binsearch"])
def test_family_splits_rho_for_the_draw_methods(sample, method):
    res = confidence_intervals(sample, [0.25, 0.75], rho=0.5, bounds=BOUNDS, method=method,
                               rng=4)
    assert res.privacy.rho == pytest.approx(0.5)


def test_bad_levels(sample):
    with pytest.raises(InvalidParameterError, match="q="):
        confidence_interval(sample, 1.0, rho=0.5, bounds=BOUNDS)
    with pytest.raises(InvalidParameterError, match="qs"):
        confidence_intervals(sample, [], rho=0.5, bounds=BOUNDS)
    with pytest.raises(dpfair.MissingPublicBoundError):
        confidence_interval(sample, 0.5, rho=0.5, bounds=None)


def test_end_on_bound_when_no_rank_and_warning():
    x = np.random.default_rng(1).uniform(0, 1, 60)
    with pytest.warns(QuantileWarning, match="public bound"):
        r = confidence_interval(x, 0.02, rho=0.2, bounds=(0.0, 1.0), method="expmech",
                                localize=False, rng=0)
    assert r.low == 0.0
    assert r.diagnostics["target_ranks"][0] is None
    assert r.privacy.rho < 0.2  # the missing end spent nothing


def test_large_rho_warning(sample):
    with pytest.warns(QuantileWarning, match="little privacy"):
        confidence_interval(sample, 0.5, rho=5.0, bounds=BOUNDS, rng=0)


def test_coarse_granularity_warning():
    x = np.random.default_rng(2).normal(0, 1, 5000)
    with pytest.warns(QuantileWarning, match="granularity"):
        r = confidence_interval(x, 0.5, rho=0.5, bounds=(-1e4, 1e4), method="cdf",
                                localize=False, rng=0)
    assert any("granularity" in w for w in r.warnings)


def test_no_warning_in_the_ordinary_case(sample):
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuantileWarning)
        r = confidence_interval(sample, 0.5, rho=0.5, bounds=BOUNDS, rng=0)
    assert r.warnings == ()


def test_warnings_are_free(sample):
    # the same seed gives the same interval whether or not warnings fire
    a = confidence_interval(sample, 0.5, rho=5.0, bounds=BOUNDS, rng=7)
    assert a.privacy.rho == pytest.approx(5.0)


def test_same_seed_same_output(sample):
    a = confidence_interval(sample, 0.3, rho=0.5, bounds=BOUNDS, rng=11)
    b = confidence_interval(sample, 0.3, rho=0.5, bounds=BOUNDS, rng=11)
    assert (a.low, a.high) == (b.low, b.high)
    x = sample.copy()
    confidence_interval(x, 0.3, rho=0.5, bounds=(0.0, 1.0), rng=1)
    assert np.array_equal(x, sample)  # the caller's array is not clipped


def test_cdf_band_shape_and_budget(sample):
    b = cdf_band(sample, rho=0.5, bounds=BOUNDS, rng=0)
    assert b.privacy.rho == pytest.approx(0.5)
    assert np.all(np.diff(b.lower) >= 0) and np.all(np.diff(b.upper) >= 0)
    assert np.all(b.lower <= b.upper) and b.upper[-1] == 1.0
    assert np.all((0 <= b.values) & (b.values <= 1))
    d = b.to_dict()
    assert d["alpha"] == 0.05


def test_result_to_dict(sample):
    r = confidence_interval(sample, 0.5, rho=0.5, bounds=BOUNDS, rng=0)
    d = r.to_dict()
    assert d["q"] == 0.5 and d["privacy"]["rho"] == pytest.approx(0.5)
    res = confidence_intervals(sample, [0.25, 0.75], rho=0.5, bounds=BOUNDS, rng=0)
    assert len(res.to_dict()["intervals"]) == 2


def test_localised_expmech_tail_constant_is_public():
    # The localised ExpMech ranks use C = K_E/2 (K_E from the public width model) whatever
    # ranges stage 1 and the split picked: the padded cell grid's own constant is below it
    # for every range (so the ranks are data-free).
    from dpfair.median._expmech import CellGrid

    rng = np.random.default_rng(5)
    x = rng.lognormal(0, 1, 500)
    r = confidence_interval(x, 0.5, rho=0.5, bounds=BOUNDS, method="expmech", rng=0)
    steps = r.diagnostics["steps"]
    assert r.diagnostics["tail_constant"] == steps / 2.0
    for _ in range(200):
        a = float(rng.uniform(-1e6, 1e6))
        w = float(10 ** rng.uniform(-6, 5))
        grid = CellGrid.for_bounds((a, a + w), w / steps)
        assert grid.padded_tail_constant < steps / 2.0


@pytest.mark.parametrize("method", METHODS)
def test_wide_bounds_default_is_narrow(method):
    # issue 22: a fixed fraction of |R| made the default useless on wide public bounds
    x = np.random.default_rng(6).gamma(2.0, 1.0, 20_000)
    lo, hi = dpfair.quantiles.nonprivate_interval(x, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantileWarning)
        r = confidence_interval(x, 0.5, rho=0.5, bounds=(-1e6, 1e6), method=method, rng=0)
        old = confidence_interval(x, 0.5, rho=0.5, bounds=(-1e6, 1e6), method=method,
                                  localize=False, rng=0)
    assert r.width < 2.0 * (hi - lo)
    assert old.width > 100 * (hi - lo)
    assert r.low <= float(np.median(x)) <= r.high


# ---------------------------------------------------------------- issue 22 follow-up
TINY = 5e-324  # 2^-1074, the smallest subnormal


def test_subnormal_localised_grid_constant_would_depend_on_the_range():
    # Reproduction of the validity gap: with subnormal widths fl(w/128) rounds, the cell
    # grid keeps more than 128·Q cells, and its own tail constant exceeds 128. The former
    # code used max(128, C_grid), so the rank targets depended on the data-chosen R₂.
    from dpfair.median._expmech import CellGrid

    w = 12223 * TINY
    assert CellGrid.for_bounds((0.0, w), w / 128).tail_constant > 128  # ≈ 187
    a = 1e-310  # another R₂ of the same public bounds: max(128, C) = 128 there
    assert CellGrid.for_bounds((a, a + 2240 * TINY), 2240 * TINY / 128).tail_constant < 128
    # such ranges can only come from public bounds whose stage-1 step is below 2^-1000:
    from dpfair.quantiles._api import localization_depth, localized_expmech_regular

    n, bounds = 500, (0.0, 2.0**-1010)
    assert (bounds[1] - bounds[0]) / 2.0 ** localization_depth(n, bounds) < 2.0**-1000
    assert not localized_expmech_regular(n, bounds)
    assert localized_expmech_regular(n, (-5.0, 15.0))
    assert localized_expmech_regular(n, (1e300, 1e300 * (1 + 2.0**-40)))


def test_regular_localised_grids_have_constant_below_128_even_when_coarsened():
    # Every R₂ a regular (n, R) can produce: width ≥ step₁/2 ≥ 2^-1001, any magnitude,
    # including widths so small relative to |a| that the cells are coarsened.
    from dpfair.median._expmech import CellGrid

    rng = np.random.default_rng(22)
    coarsened = 0
    for _ in range(4000):
        a = float(rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-290, 300))
        w = max(abs(a) * 2.0 ** rng.uniform(-60, 2), 2.0**-1001)
        b = a + w
        if not (b > a and np.isfinite(b)):
            continue
        grid = CellGrid.for_bounds((a, b), (b - a) / 128)
        coarsened += grid.per_theta == 1
        assert grid.tail_constant < 128, (a, b, grid)
    assert coarsened > 100  # the coarsened branch was exercised


def test_narrow_public_bounds_skip_localised_expmech_with_public_constant():
    # Below the regularity step the public-range ExpMech runs: its constant is a function
    # of the public (R, θ) only, identical for data that put stage 1 anywhere.
    # (2^-985: narrow enough for the fallback, wide enough for the median's public
    # minimum grid step 2^-1000, below which the release is refused)
    bounds = (0.0, 2.0**-985)
    rng = np.random.default_rng(3)
    consts = []
    for loc in (0.1, 0.9):
        x = bounds[1] * np.clip(rng.normal(loc, 0.01, 500), 0, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QuantileWarning)
            r = confidence_interval(x, 0.5, rho=0.5, bounds=bounds, method="expmech", rng=0)
        assert "localize_skipped" in r.diagnostics
        assert r.low <= loc * bounds[1] * 1.5
        consts.append(r.diagnostics["tail_constant"])
    assert consts[0] == consts[1]


def test_expmech_refuses_a_public_constant_below_the_grid():
    from dpfair.quantiles._methods import expmech_quantile

    x = np.sort(np.random.default_rng(0).uniform(0, 1, 200))
    with pytest.raises(RuntimeError, match="tail_constant"):
        expmech_quantile(x, 0.5, 0.5, (0.0, 1.0), 0.025, 0.025, 1 / 4000,
                         np.random.default_rng(0), tail_constant=1.0)


def test_little_privacy_threshold_is_the_medians():
    # dpfair._advice: ε > 10 at δ = 1e-6 by the library's conversion (ρ ≈ 1.54), the
    # same text as the median's; ρ = 2 is ε ≈ 11.7 (the former comment said 9.4).
    from dpfair._advice import little_privacy
    from dpfair._warnings import FreeWarning
    from dpfair.privacy import Budget

    x = np.random.default_rng(1).normal(0, 1, 2000)
    with pytest.warns(FreeWarning, match="little privacy"):
        r = confidence_interval(x, 0.5, rho=1.6, bounds=(-10, 10), rng=0)
    assert little_privacy(Budget.zcdp(1.6)) in r.warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuantileWarning)
        r = confidence_interval(x, 0.5, rho=1.5, bounds=(-10, 10), rng=0)
    assert not any("little privacy" in w for w in r.warnings)


@pytest.mark.parametrize("method", METHODS)
def test_huge_rho_bounds_missing_the_data_is_bounded_work(method, monkeypatch):
    # `quantile-ci --rho 1e6 --bounds 50 100` on ages with median 37: the work is bounded
    # by public caps (stage-1 depth ≤ 40, tree depth ≤ 12, 2^7 search bins, K_E·Q cells
    # with K_E ≤ max(EXPMECH_STEPS) = 2048), whatever ρ is; counted, never timed.
    import dpfair.quantiles._api as api

    calls: list[int] = []
    real = api.leaf_counts_sorted

    def counting(x, b, depth, **kw):
        calls.append(depth)
        return real(x, b, depth, **kw)

    monkeypatch.setattr(api, "leaf_counts_sorted", counting)
    x = np.random.default_rng(4).gamma(4.0, 9.0, 5000) + 17
    with pytest.warns(QuantileWarning) as seen:
        r = confidence_interval(x, 0.5, rho=1e6, bounds=(50.0, 100.0), method=method, rng=0)
    texts = " ".join(str(w.message) for w in seen)
    assert "the bounds may not contain the quantile" in texts
    assert "little privacy" in texts
    assert r.low == 50.0
    assert all(d <= 12 for d in calls)
    loc = r.diagnostics["localize"]
    assert loc["depth"] <= 40 and loc.get("tree_depth", 0) <= 12
    cells = r.diagnostics.get("output_grid", {}).get("cells", 0)
    assert cells <= max(api.EXPMECH_STEPS) * 64 + 2

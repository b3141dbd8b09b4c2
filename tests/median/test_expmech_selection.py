"""ExpMech by selection (no full sort) releases exactly what ExpMech on the sorted data does."""

from __future__ import annotations

import numpy as np
import pytest

from dpfair.median import _expmech
from dpfair.median._expmech import CellGrid, SelectedSample, expmech_interval

BOUNDS = (-5.0, 15.0)


@pytest.fixture(autouse=True)
def _small_selection(monkeypatch):
    """Run the selection path (not the small-n sort) at test sizes, with small chunks."""
    monkeypatch.setattr(_expmech, "_SELECT_MIN_N", 64)
    monkeypatch.setattr(_expmech, "_PILOT", 256)
    monkeypatch.setattr(_expmech, "_SELECT_CHUNK", 1000)


def _designs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    logn = rng.lognormal(np.log(1.5), 1.0, 20000)
    fool = np.sort(rng.normal(0.0, 1.0, 20000))
    fool[:: max(1, 20000 // 256)] = 14.0  # the strided pilot sees only 14.0: it must miss
    return {
        "lognormal": logn,
        "sorted": np.sort(logn),
        "reversed": np.sort(logn)[::-1].copy(),
        "ties": np.round(logn),  # few distinct values, huge ties at every rank
        "clipped": rng.normal(14.0, 4.0, 20000),  # a third clipped onto the upper bound
        "pilot_fooled": fool,
        "small": logn[:300],
        "atom": np.concatenate([np.full(15000, 2.0), rng.uniform(-5, 15, 5000)]),
    }


@pytest.mark.parametrize("design", list(_designs(np.random.default_rng(0))))
def test_windows_are_exact_order_statistics(design, seed):
    rng = np.random.default_rng(seed)
    x = np.clip(_designs(rng)[design], *BOUNDS)
    before = x.copy()
    ref = np.sort(x)
    n = x.size
    windows = [(0, 5), (n // 2 - 40, n // 2 + 40), (n // 3, n // 3 + 3), (n - 7, n - 1)]
    sample = SelectedSample(x, windows)
    for r0, r1 in windows:
        idx = np.arange(r0, r1 + 1)
        assert np.array_equal(sample.take(idx), ref[idx])
    # ranks outside every window still answer exactly (a full sort)
    assert np.array_equal(sample.take(np.array([n // 4, n // 4 + 1])), ref[[n // 4, n // 4 + 1]])
    assert np.array_equal(x, before)  # never modified


@pytest.mark.parametrize("design", list(_designs(np.random.default_rng(0))))
@pytest.mark.parametrize("rho", [0.05, 0.5, 4.0])
def test_interval_identical_to_sorted_path(design, rho, seed):
    rng = np.random.default_rng(seed)
    x = np.clip(_designs(rng)[design], *BOUNDS)
    theta = 20.0 / 4000.0
    g_sorted, g_sel = np.random.default_rng(seed + 11), np.random.default_rng(seed + 11)
    ref = expmech_interval(np.sort(x), rho, BOUNDS, 0.05, theta, g_sorted)
    got = expmech_interval(x, rho, BOUNDS, 0.05, theta, g_sel, presorted=False)
    assert got[:2] == ref[:2]
    assert got[3]["target_ranks"] == ref[3]["target_ranks"]
    assert g_sel.random() == g_sorted.random()  # same number of draws consumed


@pytest.mark.parametrize("design", ["lognormal", "ties", "clipped"])
def test_rare_full_branch_identical(monkeypatch, design, seed):
    """A negative margin makes the O(n) branch (outside the window) run often."""
    monkeypatch.setattr(_expmech, "_WINDOW_MARGIN_DIGITS", -3.5)
    rng = np.random.default_rng(seed)
    x = np.clip(_designs(rng)[design], *BOUNDS)
    for s in range(20):
        g1, g2 = np.random.default_rng(s), np.random.default_rng(s)
        ref = expmech_interval(np.sort(x), 0.5, BOUNDS, 0.05, 0.005, g1)
        got = expmech_interval(x, 0.5, BOUNDS, 0.05, 0.005, g2, presorted=False)
        assert got[:2] == ref[:2]
        assert g1.random() == g2.random()


def test_cell_draw_for_any_rank(seed):
    rng = np.random.default_rng(seed)
    x = np.clip(rng.lognormal(0.4, 1.0, 5000), *BOUNDS)
    grid = CellGrid.for_bounds(BOUNDS, 0.01)
    for k in (0, 1, 250, 2500, 4999, 5000):
        sample = SelectedSample.for_cell_ranks(x, [k], 1.0, grid)
        g1, g2 = np.random.default_rng(k), np.random.default_rng(k)
        a = _expmech.sample_order_statistic_cell(np.sort(x), k, 1.0, grid, g1)
        b = _expmech.sample_order_statistic_cell(sample, k, 1.0, grid, g2)
        assert a == b and g1.random() == g2.random()


# --- ExpMech on the caller's unclipped array (clip as read, no clipped copy) -----------


def _raw_designs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Unclipped samples: outliers far outside R, atoms on the bounds, pilots fooled."""
    n = 20000
    below = np.sort(rng.normal(0.0, 1.0, n))
    below[:: max(1, n // 256)] = -1e9  # the pilot sees only a far outlier under lo
    above = rng.normal(2.0, 1.0, n)
    above[:: max(1, n // 256)] = 1e12  # ... or only one above hi
    return {
        **_designs(rng),
        "outliers": np.concatenate([rng.lognormal(0.4, 1.0, n - 3000),
                                    rng.uniform(-1e6, -5.0, 1500), rng.uniform(15, 1e6, 1500)]),
        "mostly_below": rng.normal(-50.0, 1.0, n),  # every order statistic is lo
        "mostly_above": rng.normal(90.0, 1.0, n),
        "on_bounds": rng.choice([-7.0, -5.0, 0.0, 15.0, 16.0], n),
        "pilot_below": below,
        "pilot_above": above,
        "signed_zero": rng.choice([-0.0, 0.0, 1.0, -30.0], n),
    }


@pytest.mark.parametrize("design", list(_raw_designs(np.random.default_rng(0))))
def test_clip_windows_are_clipped_order_statistics(design, seed):
    rng = np.random.default_rng(seed)
    x = _raw_designs(rng)[design]
    before = x.copy()
    ref = np.sort(np.clip(x, *BOUNDS))
    n = x.size
    windows = [(0, 5), (n // 2 - 40, n // 2 + 40), (n // 3, n // 3 + 3), (n - 7, n - 1)]
    sample = SelectedSample(x, windows, clip=BOUNDS)
    for r0, r1 in windows:
        idx = np.arange(r0, r1 + 1)
        assert np.array_equal(sample.take(idx), ref[idx])
    assert np.array_equal(sample.take(np.array([n // 4, n // 4 + 1])), ref[[n // 4, n // 4 + 1]])
    assert np.array_equal(x, before, equal_nan=True)  # the caller's array: never modified


@pytest.mark.parametrize("design", list(_raw_designs(np.random.default_rng(0))))
@pytest.mark.parametrize("rho", [0.05, 0.5, 4.0])
def test_clip_interval_identical_to_clipped_copy(design, rho, seed):
    rng = np.random.default_rng(seed)
    x = _raw_designs(rng)[design]
    g_ref, g_raw = np.random.default_rng(seed + 3), np.random.default_rng(seed + 3)
    ref = expmech_interval(np.sort(np.clip(x, *BOUNDS)), rho, BOUNDS, 0.05, 0.005, g_ref)
    got = expmech_interval(x, rho, BOUNDS, 0.05, 0.005, g_raw, presorted=False, clip=True)
    assert got[:2] == ref[:2]
    assert got[3]["target_ranks"] == ref[3]["target_ranks"]
    assert g_raw.random() == g_ref.random()


@pytest.mark.parametrize("design", ["outliers", "mostly_below", "on_bounds"])
def test_clip_rare_full_branch_identical(monkeypatch, design, seed):
    monkeypatch.setattr(_expmech, "_WINDOW_MARGIN_DIGITS", -3.5)
    rng = np.random.default_rng(seed)
    x = _raw_designs(rng)[design]
    for s in range(20):
        g1, g2 = np.random.default_rng(s), np.random.default_rng(s)
        ref = expmech_interval(np.sort(np.clip(x, *BOUNDS)), 0.5, BOUNDS, 0.05, 0.005, g1)
        got = expmech_interval(x, 0.5, BOUNDS, 0.05, 0.005, g2, presorted=False, clip=True)
        assert got[:2] == ref[:2]
        assert g1.random() == g2.random()


def test_clip_needs_an_unsorted_read():
    x = np.linspace(-10, 20, 100)
    with pytest.raises(ValueError, match="presorted=False"):
        expmech_interval(x, 0.5, BOUNDS, 0.05, 0.005, np.random.default_rng(0), clip=True)

"""The fast leaf counts (sorted: binary search; unsorted: chunked) equal the old rule exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair import InvalidDataError
from dpfair.mechanisms import leaf_counts, leaf_edges
from dpfair.mechanisms import tree as tree_mod
from dpfair.mechanisms.tree import leaf_counts_sorted


def _reference_leaf_counts(x: np.ndarray, bounds: tuple[float, float], depth: int) -> np.ndarray:
    """The implementation before the speed work (one pass over all values), test-only."""
    lo, hi = bounds
    grid = leaf_edges(bounds, depth)
    n_leaves = grid.size - 1
    scale = n_leaves / (hi - lo)
    if math.isfinite(scale):
        bins = np.ceil((x - lo) * scale).astype(np.int64) - 1
    else:
        bins = np.searchsorted(grid[1:], x, side="left").astype(np.int64)
    np.clip(bins, 0, n_leaves - 1, out=bins)
    while True:
        up = x > grid[bins + 1]
        down = (x <= grid[bins]) & (bins > 0)
        if not (up.any() or down.any()):
            break
        bins += up
        bins -= down
    return np.bincount(bins, minlength=n_leaves).astype(np.int64)


def _designs(rng: np.random.Generator, bounds: tuple[float, float], depth: int):
    lo, hi = bounds
    grid = leaf_edges(bounds, depth)
    yield "uniform", rng.uniform(lo, hi, 5000)
    yield "on_grid", rng.choice(grid, 3000)  # every value exactly on a bin edge
    near = rng.choice(grid, 2000)
    yield "next_to_grid", np.clip(np.nextafter(near, rng.choice([-np.inf, np.inf], 2000)), lo, hi)
    yield "ends", np.concatenate([np.full(50, lo), np.full(70, hi), rng.uniform(lo, hi, 30)])
    yield "empty", np.empty(0)
    yield "one", np.array([lo + (hi - lo) / 3])


BOUNDS_LIST = [(-5.0, 15.0), (0.0, 1.0), (1e6, 1e6 + 0.001), (-1e300, 1e300), (0.0, 5e-324 * 8)]


@pytest.mark.parametrize("bounds", BOUNDS_LIST)
@pytest.mark.parametrize("depth", [1, 3, 9])
def test_sorted_and_unsorted_paths_equal_reference(bounds, depth, seed):
    rng = np.random.default_rng(seed)
    for name, x in _designs(rng, bounds, depth):
        ref = _reference_leaf_counts(x, bounds, depth)
        got = leaf_counts(x, bounds, depth)
        srt = np.sort(x)
        assert np.array_equal(got, ref), name
        assert np.array_equal(leaf_counts(srt, bounds, depth), ref), name
        assert np.array_equal(leaf_counts_sorted(srt, bounds, depth), ref), name
        assert got.dtype == np.int64


def test_chunked_path_crosses_chunks(monkeypatch, seed):
    monkeypatch.setattr(tree_mod, "_CHUNK", 1000)
    monkeypatch.setattr(tree_mod, "_SORT_CHECK_CHUNK", 7)
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(-5, 15, 12345), 1)
    ref = _reference_leaf_counts(x, (-5.0, 15.0), 6)
    assert np.array_equal(leaf_counts(x, (-5.0, 15.0), 6), ref)
    srt = np.sort(x)
    assert tree_mod._is_sorted(srt) and not tree_mod._is_sorted(x)
    srt_bad = srt.copy()
    srt_bad[7 * 5 + 1], srt_bad[7 * 5] = srt[7 * 5], srt[7 * 5 + 1] + 1.0  # one pair inverted
    assert not tree_mod._is_sorted(srt_bad)
    assert np.array_equal(leaf_counts(srt, (-5.0, 15.0), 6), ref)


def test_sorted_counts_clip_implicitly(seed):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.normal(5.0, 10.0, 4000))
    for bounds in [(-5.0, 15.0), (2.0, 2.5)]:
        ref = _reference_leaf_counts(np.clip(x, *bounds), bounds, 7)
        assert np.array_equal(leaf_counts_sorted(x, bounds, 7), ref)
        assert np.array_equal(leaf_counts_sorted(x, bounds, 7, check=False), ref)


def test_leaf_counts_does_not_copy_or_modify_input():
    x = np.random.default_rng(0).uniform(0, 1, 1000)
    before = x.copy()
    leaf_counts(x, (0.0, 1.0), 4)
    assert np.array_equal(x, before)


def test_sorted_errors():
    with pytest.raises(InvalidDataError, match="not in non-decreasing order"):
        leaf_counts_sorted(np.array([1.0, 0.0]), (0.0, 1.0), 2)
    with pytest.raises(InvalidDataError, match="non-finite"):
        leaf_counts_sorted(np.array([0.0, np.nan]), (0.0, 1.0), 2)
    with pytest.raises(InvalidDataError, match="1-D"):
        leaf_counts_sorted(np.zeros((2, 2)), (0.0, 1.0), 2)
    with pytest.raises(InvalidDataError, match="non-finite"):
        leaf_counts(np.array([0.5, np.inf]), (0.0, 1.0), 2)
    with pytest.raises(InvalidDataError, match="outside bounds"):
        leaf_counts(np.array([0.5, 2.0]), (0.0, 1.0), 2)

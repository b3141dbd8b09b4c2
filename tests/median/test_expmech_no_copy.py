"""The median API's ExpMech reads a float64 array in place: same release, no copy of n values."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import dpfair
from dpfair import InvalidDataError

BOUNDS = (-5.0, 15.0)
N = 300_000  # above the selection threshold: the no-copy path runs at its real size


def _sample(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(np.log(1.5), 1.0, N)
    x[rng.integers(0, N, 2000)] = rng.uniform(-1e6, 1e6, 2000)  # records outside R
    return x


@pytest.mark.parametrize("rho", [0.05, 0.5, 10.0])
def test_same_release_as_the_copying_path(rho, seed):
    """A float64 array (read in place) and the same values through the copying path."""
    x = _sample(seed)
    before = x.copy()
    raw = dpfair.median.confidence_interval(x, rho=rho, bounds=BOUNDS, rng=seed)
    copied = dpfair.median.confidence_interval(x.reshape(1, -1), rho=rho, bounds=BOUNDS,
                                               rng=seed)  # squeezed: the copy path
    assert (raw.low, raw.high) == (copied.low, copied.high)
    assert raw.diagnostics == copied.diagnostics
    assert raw.privacy == copied.privacy
    assert np.array_equal(x, before)  # the caller's array is untouched


def test_no_copy_of_the_data(seed):
    """Peak traced memory of the call stays below half the input's size (no n-sized copy)."""
    x = _sample(seed)
    dpfair.median.confidence_interval(x, rho=0.5, bounds=BOUNDS, rng=0)  # warm caches
    tracemalloc.start()
    try:
        dpfair.median.confidence_interval(x, rho=0.5, bounds=BOUNDS, rng=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes / 2, (peak, x.nbytes)  # a copy alone is x.nbytes


@pytest.mark.parametrize("where", [0, N // 2, N - 1])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_raises_with_its_index(where, bad):
    x = _sample(0)
    x[where] = bad
    with pytest.raises(InvalidDataError, match=f"first at index {where}:"):
        dpfair.median.confidence_interval(x, rho=0.5, bounds=BOUNDS, rng=0)

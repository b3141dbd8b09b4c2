"""Public bounds so narrow that the grid step is subnormal: one clear error, never a
ZeroDivisionError or a loop (the check reads only public inputs)."""

from __future__ import annotations

import numpy as np
import pytest

import dpfair
from dpfair import InvalidParameterError

METHODS = ["expmech", "cdf", "binsearch", "binsearch_cdf"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bounds", [(0.0, 5e-324), (0.0, 1e-310), (1e-310, 1.0000001e-310)])
def test_subnormal_grid_step_is_refused_naming_bounds(method, bounds):
    x = np.zeros(100)
    with pytest.raises(InvalidParameterError, match=r"bounds=.*rescale"):
        dpfair.median.confidence_interval(x, rho=0.5, bounds=bounds, method=method, rng=1)


@pytest.mark.parametrize("method", METHODS)
def test_tiny_but_normal_ranges_still_release(method):
    x = np.zeros(100)
    r = dpfair.median.confidence_interval(x, rho=0.5, bounds=(0.0, 1e-290), method=method, rng=1)
    assert 0.0 <= r.low <= r.high <= 1e-290

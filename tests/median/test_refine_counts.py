"""confidence_interval_from_counts validates what a user's refine callable returns
(issue 15, item 6): a refine that filters instead of clipping used to be accepted, its
total silently taken as the public size of the second stage."""

from __future__ import annotations

import numpy as np
import pytest

from dpfair import InvalidDataError
from dpfair.mechanisms import leaf_counts
from dpfair.median import confidence_interval_from_counts

BOUNDS = (-5.0, 15.0)
DEPTH = 9  # the default binsearch_cdf grid for this range


@pytest.fixture(scope="module")
def sample() -> np.ndarray:
    return np.random.default_rng(3).lognormal(np.log(1.5), 1.0, 2000)


def _run(sample, refine):
    counts = leaf_counts(np.clip(sample, *BOUNDS), BOUNDS, DEPTH)
    return confidence_interval_from_counts(counts, 1.0, BOUNDS, method="binsearch_cdf",
                                           rng=0, refine=refine)


def test_clipping_refine_is_accepted(sample):
    def refine(b, d):
        return leaf_counts(np.clip(sample, *b), b, d)

    r = _run(sample, refine)
    assert r.low <= r.high


def test_filtering_refine_is_refused_with_the_totals(sample):
    seen = {}

    def refine(b, d):
        inside = sample[(sample >= b[0]) & (sample <= b[1])]
        seen["total"] = inside.size
        return leaf_counts(inside, b, d)

    with pytest.raises(InvalidDataError, match=r"sum to \d+, but the data have n = 2000"):
        _run(sample, refine)
    assert seen["total"] < 2000


@pytest.mark.parametrize(("bad", "match"), [
    (lambda b, d: np.ones(2**d + 2, dtype=int), "power of two"),
    (lambda b, d: np.ones(2**(d - 1), dtype=int), r"expected \d+ bins"),
    (lambda b, d: np.full(2**d, -1), "non-negative integers"),
    (lambda b, d: np.full(2**d, 0.5), "non-negative integers"),
    (lambda b, d: np.array(["a"] * 2**d), "non-negative integers"),
])
def test_refine_shape_and_values_are_checked(sample, bad, match):
    with pytest.raises(InvalidDataError, match=match):
        _run(sample, bad)

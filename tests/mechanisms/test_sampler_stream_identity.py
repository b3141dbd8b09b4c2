"""The discrete Gaussian sampler's output stream is unchanged by its in-place rewrites.

The sampler's law is exact whatever the batching; these tests pin something stronger that
the seeded quantile and fairness references rely on: for the same seed the same draws, bit
for bit, as the code before the rewrites (commit a9411e1, run in a subprocess), on every
path (the int64 table path D ≤ 2^62 with t | σ², a general rational variance, the big
denominator path D > 2^62, tiny variances, several rounds).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfair.mechanisms.discrete_gaussian import round_to_scale, sample_discrete_gaussian
from tests._quantile_reference import extract_reference, run_reference

#: (numerator, denominator, size, seed): every path of the sampler.
CASES = [
    (round_to_scale(27963392), 1, 8190, 0),  # the localised tree's noise (two rounds)
    (round_to_scale(45883392), 1, 56, 1),  # a stage-1 search's noise
    (7, 3, 5000, 2),  # a general rational: D = B
    (1, 4, 3000, 3),  # σ < 1
    (2**80 + 1, 3, 500, 4),  # D > 2^62: the big-denominator path
    (round_to_scale(10**6), 1, 12000, 5),  # three rounds
]

_CODE = r"""
import json, sys, hashlib
from fractions import Fraction
import numpy as np
from dpfair.mechanisms.discrete_gaussian import sample_discrete_gaussian
out = []
for num, den, size, seed in json.load(sys.stdin):
    z = sample_discrete_gaussian(Fraction(num, den), size, np.random.default_rng(seed))
    out.append(hashlib.sha256(np.ascontiguousarray(z, dtype=np.int64).tobytes()).hexdigest())
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def reference_digests(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    src = extract_reference(tmp_path_factory)
    out = run_reference(src, _CODE, CASES)
    assert isinstance(out, list)
    return [str(d) for d in out]


def test_same_seed_same_draws_as_before(reference_digests: list[str]) -> None:
    import hashlib

    for (num, den, size, seed), want in zip(CASES, reference_digests, strict=True):
        z = sample_discrete_gaussian(Fraction(num, den), size, np.random.default_rng(seed))
        got = hashlib.sha256(np.ascontiguousarray(z, dtype=np.int64).tobytes()).hexdigest()
        assert got == want, (num, den, size, seed)

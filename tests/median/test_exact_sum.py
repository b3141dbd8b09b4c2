"""``median._cdf._exact_sum`` is ``math.fsum`` bit for bit (the binomial window's normaliser).

The normaliser of every envelope threshold's binomial window was ``math.fsum`` over a
Python list; the vectorised exact sum must return the same binary64 value on every input
(so every threshold, hence every released interval, is unchanged): random values over a
wide exponent range, signed values with cancellation, ties to even, subnormals, and the
actual window shapes at the sizes and levels the quantile API uses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.median import _cdf


def _same(a: np.ndarray) -> None:
    got = _cdf._exact_sum(a)
    want = math.fsum(a.tolist())
    assert got.hex() == want.hex(), (got, want)


@pytest.mark.parametrize("kind", range(6))
def test_random_inputs_match_fsum(kind):
    rng = np.random.default_rng(100 + kind)
    for _ in range(300):
        k = int(rng.integers(1, 3000))
        if kind == 0:
            a = rng.random(k)
        elif kind == 1:
            a = np.exp(-rng.random(k) * 60.0)
        elif kind == 2:
            a = rng.standard_normal(k) * np.exp(rng.standard_normal(k) * 30.0)
        elif kind == 3:  # exact ties at half an ulp of 1 (round half to even)
            a = np.r_[1.0, np.full(k, 2.0**-54) * rng.integers(0, 3, k)]
        elif kind == 4:
            a = np.r_[2.0**53, 1.0, 2.0**-60 * rng.integers(0, 2, k)]
        else:  # subnormals and a negative term
            a = np.r_[1.0, 2.0**-53, 2.0**-1074 * rng.integers(0, 4, k), -1e-300]
        _same(a)


@pytest.mark.parametrize("a", [
    [1.0, 2.0**-53], [1.0, 2.0**-53, 2.0**-1074], [1.0 + 2.0**-52, 2.0**-53], [0.0], [-0.0],
    [5e-324] * 10, [1.0, -1.0], [1e16, 1.0, -1e16], [1e308, -1e308, 3.0], [0.1] * 10,
])
def test_edge_cases_match_fsum(a):
    _same(np.array(a, dtype=np.float64))


@pytest.mark.parametrize("n", [10, 1000, 999_983, 10**6 + 17])
@pytest.mark.parametrize("p", [0.5, 0.1, 0.9, 0.25, 0.01])
def test_window_shapes_match_fsum(monkeypatch, n, p):
    seen: list[np.ndarray] = []
    real = _cdf._exact_sum

    def spy(values):
        seen.append(np.array(values, copy=True))
        return real(values)

    monkeypatch.setattr(_cdf, "_exact_sum", spy)
    _cdf._binomial_support.__wrapped__(n, p)
    monkeypatch.undo()
    assert seen
    for shape in seen:
        _same(shape)


def test_binomial_windows_are_the_recorded_bytes():
    """The envelope tests' binomial windows (support, pmf upper bounds, dropped mass and
    suffix sums) are byte for byte those of the code before the in-place rewrite (digest
    recorded with commit a9411e1): the law's numbers did not move."""
    import hashlib

    h = hashlib.sha256()
    for n in (1, 7, 333, 12345, 10**6 + 17):
        for p in (0.5, 0.1, 0.9, 0.01):
            k, pmf, dropped = _cdf._binomial_support.__wrapped__(n, p)
            h.update(k.tobytes())
            h.update(pmf.tobytes())
            h.update(float(dropped).hex().encode())
            h.update(_cdf._binomial_suffix.__wrapped__(n, p).tobytes())
    assert h.hexdigest() == "5e1b903183b1ecdb8ac7362fc6879ac4466bb46c2c5a4f1822a1dd494ae3eb02"


@pytest.mark.parametrize("seed", range(4))
def test_wide_exponent_ranges_match_fsum(seed):
    """Inputs spanning more than _SMALL_BINS binary orders take the bounded path (the tiny
    bins bounded, not summed, when the bound cannot move the rounding); the rest falls
    back to the full sum. Ties at half an ulp broken (or not) by a tiny term, tiny terms
    of both signs, cancellation of the large part, and the windows' own shapes."""
    rng = np.random.default_rng(700 + seed)
    half_ulp = 2.0**-53
    cases = [
        [1.0, half_ulp, 2.0**-200],  # a tie broken upward by a tiny term
        [1.0, half_ulp, -(2.0**-200)],  # ... broken downward
        [1.0 + 2.0**-52, half_ulp, 2.0**-300],  # odd significand: tie would go up
        [1.0, half_ulp],
        [1.0, -1.0, 2.0**-200, 2.0**-250],  # the large part cancels exactly
        [2.0**100, 3.0, -(2.0**100), 2.0**-120],
        [1e-300, 1e-300 * 2.0**-60, 1e-300 * 2.0**-140],
    ]
    for case in cases:
        _same(np.array(case, dtype=np.float64))
    for _ in range(200):
        k = int(rng.integers(2, 2000))
        a = np.exp(-rng.random(k) * rng.choice([100.0, 300.0, 600.0]))
        if rng.random() < 0.5:
            a *= rng.choice([-1.0, 1.0], k)
        if rng.random() < 0.3:  # plant a half-ulp tie on the largest value
            top = float(np.max(np.abs(a)))
            a = np.r_[a, np.spacing(top) / 2.0]
        _same(a)

"""The lockstep NoisyBinSearch of several quantiles equals one search per quantile, bit for bit.

:func:`binsearch_quantiles` draws the noise of every searched quantile in ONE sampler call
(a (K, 2D) block of i.i.d. exact discrete Gaussians, row i for the i-th quantile with a
valid rank) and computes the exact counts differently (one vectorised count per step).
The reference below runs one scalar :func:`binsearch_quantile` per quantile, each fed its
row of the same block: the same public choices, pricing, noise and bisection must give
the same bits. An attacker who knows that looks for the places where two implementations
of the same bisection drift apart: a noisy count exactly equal to its target rank (the
≤ / < edge of the two ends), atoms (a count constant over a run of grid points), grid
points that round onto the upper bound, a sub-normal or infinite grid step, a quantile
with no valid rank among ranked ones (it must draw nothing and leave the rows of the
others aligned), and the grid-point formula itself.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.quantiles._api import _Sorted
from dpfair.quantiles._methods import (
    binsearch_quantile,
    binsearch_quantiles,
    grid_point,
    grid_points,
)

QS = [0.1, 0.25, 0.5, 0.75, 0.9]


def _sequential(count_at, n, specs, rho, bounds, depth, seed):  # type: ignore[no-untyped-def]
    """One scalar search per quantile, each fed its row of the batched draw."""
    import dpfair.quantiles._methods as methods

    gen = np.random.default_rng(seed)
    plans = [methods._plan_search(n, p, rho, bounds, depth, a, b) for p, a, b in specs]
    active = [plan for plan in plans if isinstance(plan, methods._SearchPlan)]
    rows: list[np.ndarray] = []
    if active:
        sigma = active[0].sigma
        assert all(plan.sigma == sigma for plan in active)
        rows = list(methods._query_noise(n, sigma).sample((len(active), 2 * depth), gen))
    real = methods._query_noise

    class _Rows:  # hands out the block's rows in order, as the batched call assigns them
        def __init__(self, n: int, sigma: float) -> None:
            self.inner = real(n, sigma)

        def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
            assert size == 2 * depth
            return rows.pop(0)

    methods._query_noise = _Rows  # type: ignore[assignment]
    try:
        out = [binsearch_quantile(count_at, n, p, rho, bounds, depth, a, b, gen)
               for p, a, b in specs]
    finally:
        methods._query_noise = real
    assert not rows  # every row used, none left over
    return out


def _same(a: list, b: list) -> None:  # type: ignore[type-arg]
    assert len(a) == len(b)
    for (l1, u1, s1, d1), (l2, u2, s2, d2) in zip(a, b, strict=True):
        assert (l1, u1) == (l2, u2) or (math.isnan(l1) and math.isnan(l2))
        assert s1 == s2
        assert d1 == d2


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("data", ["lognormal", "atoms", "integers"])
def test_lockstep_equals_sequential_on_data(seed: int, data: str) -> None:
    rng = np.random.default_rng(100 + seed)
    n = 3000
    if data == "lognormal":
        x = rng.lognormal(0.0, 1.0, n)
    elif data == "atoms":  # counts constant over long runs of grid points, ties galore
        x = rng.choice([1.0, 2.0, 2.0, 3.0, 7.5], n)
    else:
        x = rng.integers(0, 20, n).astype(np.float64)
    x.sort()
    src = _Sorted(x)
    bounds, depth = (0.0, 20.0), 14
    specs = [(p, 0.01, 0.01) for p in QS]
    want = _sequential(src.count_at(bounds, depth), n, specs, 0.5, bounds, depth, seed)
    got = binsearch_quantiles(src.count_at(bounds, depth), src.count_many(bounds, depth), n,
                              specs, 0.5, bounds, depth, np.random.default_rng(seed))
    _same(got, want)


def test_ties_between_noisy_count_and_target_are_decided_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Noisy counts exactly equal to the target ranks (lower end: ≤ moves up; upper end:
    < moves up), forced with integer-valued noise and counts at the target ranks."""
    import dpfair.quantiles._methods as methods

    real = methods._query_noise

    class _IntegerNoise:  # the real noise's public constants, integer-valued draws
        def __init__(self, n: int, sigma: float) -> None:
            self.inner = real(n, sigma)

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
            return rng.integers(-1, 2, size).astype(np.float64)

    monkeypatch.setattr(methods, "_query_noise", _IntegerNoise)
    n, depth, bounds = 1000, 12, (0.0, 1.0)
    k_low, k_high = methods.binsearch_targets(
        n, methods.GaussianMechanism.for_zcdp(4.0 / (2 * depth), l2_sensitivity=1.0).sigma,
        depth, 0.5, 0.05, 0.05)
    assert k_low is not None and k_high is not None
    half = 1 << (depth - 1)

    def count_at(j: int) -> int:
        return int(k_low) if j < half else int(k_high)

    def count_many(js: np.ndarray) -> np.ndarray:
        return np.where(js < half, k_low, k_high).astype(np.int64)

    ties = 0
    for seed in range(30):
        specs = [(0.5, 0.05, 0.05)] * 3
        want = _sequential(count_at, n, specs, 4.0, bounds, depth, seed)
        got = binsearch_quantiles(count_at, count_many, n, specs, 4.0, bounds, depth,
                                  np.random.default_rng(seed))
        _same(got, want)
        for _, _, _, d in want:
            ties += sum(v in (k_low, k_high) for _, v in d["queries_lower"] + d["queries_upper"])
    assert ties > 100  # the tie branch of both ends was exercised many times


def test_no_rank_quantile_among_ranked_ones() -> None:
    """A tiny α gives some levels no valid rank: they return the public bounds and draw
    nothing, and the others' draws stay aligned."""
    rng = np.random.default_rng(7)
    n = 40
    x = np.sort(rng.normal(size=n))
    src = _Sorted(x)
    bounds, depth = (-5.0, 5.0), 10
    specs = [(0.5, 0.05, 0.05), (0.5, 1e-15, 1e-15), (0.6, 0.05, 0.05)]
    want = _sequential(src.count_at(bounds, depth), n, specs, 8.0, bounds, depth, 3)
    assert want[1][3]["n_queries"] == 0 and want[1][:2] == bounds
    assert want[0][3]["n_queries"] > 0 and want[2][3]["n_queries"] > 0
    got = binsearch_quantiles(src.count_at(bounds, depth), src.count_many(bounds, depth), n,
                              specs, 8.0, bounds, depth, np.random.default_rng(3))
    _same(got, want)


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-3.7, 11.2), (1e-300, 1e-300 * (1 + 2**-20)),
                                    (0.0, 5e-324 * 2**12), (-1e308, 1e308), (1.0, 1.0 + 2**-40),
                                    (-2.0**60, 3.0)])
@pytest.mark.parametrize("depth", [1, 7, 30, 60])
def test_grid_points_bit_identical(bounds: tuple[float, float], depth: int) -> None:
    top = (1 << depth) - 1
    rng = np.random.default_rng(depth)
    js = np.unique(np.concatenate([[1, top, (top + 1) // 2],
                                   rng.integers(1, top + 1, 200, dtype=np.int64)]))
    got = grid_points(bounds, depth, js)
    want = np.array([grid_point(bounds, depth, int(j)) for j in js])
    assert np.array_equal(got, want, equal_nan=True)


def test_grid_point_rounding_onto_the_upper_bound_counts_everyone() -> None:
    """A grid so fine that interior points round onto hi: count_many applies count_at's
    'g ≥ hi → n' (data above hi would otherwise be missed)."""
    bounds, depth = (1.0, 1.0 + 2**-40), 50
    x = np.sort(np.array([0.5, 1.0, 1.0 + 2**-41, 1.0 + 2**-40, 2.0, 3.0]))
    src = _Sorted(x)
    top = (1 << depth) - 1
    assert grid_point(bounds, depth, top) >= bounds[1]
    js = np.array([1, 2**49, top - 1, top], dtype=np.int64)
    scalar = src.count_at(bounds, depth)
    assert src.count_many(bounds, depth)(js).tolist() == [scalar(int(j)) for j in js]

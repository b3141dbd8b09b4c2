"""Attack on the ExpMech quantile ranks' exact-law tail h(t) = x_t/(1 + x_t).

Claim (``dpfair.quantiles._methods.expmech_lower_failure_exact``): given the data, the
lower end of the cell mechanism for rank k exceeds a value v with probability at most
h(B_v − k), where h(t) = 1 for t ≤ 0 and x_t/(1 + x_t) for t ≥ 1 with
x_t = C·e^{−εt/2}, C = :attr:`CellGrid.tail_constant`; mirrored for the upper end. Checked in
the strong form that atoms need (integer data): B_v = #{x_i ≤ v} for the lower end and
#{x_i < v} for the upper end. The target ranks (hence coverage) rest on it, and it
replaced min(1, x_t).

Independent check: the exact output law of the executed cell mechanism
(:func:`cell_order_statistic_law`) on adversarial data — all records equal, clumps at the
bounds, one clump at the far end (the claimed worst case), ties, n = 1, 2 — and *every*
threshold v on a fine grid plus every data value and its neighbours. A correct bound holds
exactly (up to 1e-12 of rounding in the law's floating-point evaluation); power: the clump
design comes within a few per cent of the bound, so min(1, x_t) would be visibly loose and
anything larger than x_t/(1 + x_t) would be caught.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.median._expmech import CellGrid, cell_order_statistic_law
from tests._expmech_cases import BOUNDS, GRAN, adversarial_datasets, miss_bound


def _thresholds(x: np.ndarray, grid: CellGrid) -> np.ndarray:
    fine = np.linspace(BOUNDS[0], BOUNDS[1], 4 * grid.n_cells + 1)
    near = np.concatenate([x, np.nextafter(x, -np.inf), np.nextafter(x, np.inf)])
    return np.unique(np.clip(np.concatenate([fine, near]), BOUNDS[0], BOUNDS[1]))


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_today_expmech_exact_miss_probability_within_x_over_one_plus_x(eps):
    rng = np.random.default_rng(0)
    grid = CellGrid.for_bounds(BOUNDS, GRAN)
    q = grid.per_theta
    c = grid.tail_constant
    m = np.arange(grid.n_cells)
    lows = np.maximum(BOUNDS[0], grid.low + (m - q - 1) * grid.cell)
    highs = np.minimum(BOUNDS[1], grid.low + (m + q + 2) * grid.cell)
    closest = 0.0
    for name, x in adversarial_datasets(rng).items():
        n = x.size
        vs = _thresholds(x, grid)
        # The strong (atom-safe) form: a lower end above v has every record <= v below it,
        # an upper end below v every record >= v above it. With atoms (integer data) the
        # coverage argument needs B = #{x_i <= x_q} ~ Bin(n, F(x_q)), F(x_q) >= q, for the
        # lower end and #{x_i < x_q} (law Bin(n, F(x_q-)), F(x_q-) <= q) for the upper.
        below = np.searchsorted(x, vs, side="right")  # #{x_i <= v}
        at_most = np.searchsorted(x, vs, side="left")  # #{x_i < v}
        for k in range(n + 1):
            law = cell_order_statistic_law(x, k, eps, grid)
            assert law.shape == (grid.n_cells,) and abs(law.sum() - 1.0) < 1e-12
            # P(low > v) for every v, exactly from the law
            order = np.argsort(lows)
            cum = np.concatenate([[0.0], np.cumsum(law[order])])
            p_low_miss = 1.0 - cum[np.searchsorted(lows[order], vs, side="right")]
            bound_low = miss_bound(below - k, c, eps)
            assert np.all(p_low_miss <= bound_low + 1e-12), (name, k)
            # upper end: P(high < v) <= h(k - #{x_i < v})
            order = np.argsort(highs)
            cum = np.concatenate([[0.0], np.cumsum(law[order])])
            p_high_miss = cum[np.searchsorted(highs[order], vs, side="left")]
            bound_high = miss_bound(k - at_most, c, eps)
            assert np.all(p_high_miss <= bound_high + 1e-12), (name, k)
            ok = (below - k >= 1) & (bound_low > 1e-9)
            if ok.any():
                closest = max(closest, float(np.max(p_low_miss[ok] / bound_low[ok])))
    assert closest > 0.9  # power: the bound is nearly attained on these designs


def test_today_exact_tail_is_never_above_the_old_bound():
    """h(t) ≤ min(1, x_t), so the new ranks can only move towards the classical ones."""
    grid = CellGrid.for_bounds(BOUNDS, GRAN)
    t = np.arange(-3, 200)
    for eps in (0.05, 1.0, 10.0):
        x = grid.tail_constant * np.exp(-eps * np.maximum(t, 1) / 2.0)
        old = np.where(t <= 0, 1.0, np.minimum(1.0, x))
        assert np.all(miss_bound(t, grid.tail_constant, eps) <= old)
        assert math.isclose(float(miss_bound(np.array([1]), 1.0, 1e-300)[0]), 0.5)


# ---------------------------------------------------------------- public choices of the
# localised design: the α share f₁, the stage-1 depth, the stage-1 target ranks, the tree
# depth D₂ and the ρ spent must be the same for every data set of the same public n.
def _adversarial_same_n(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [
        np.full(n, 0.5),
        np.zeros(n),
        np.ones(n),
        np.concatenate([np.zeros(n // 2), np.ones(n - n // 2)]),
        rng.uniform(size=n),
        np.clip(rng.normal(0.5, 1e-6, size=n), 0.0, 1.0),
    ]


def _public_part(res) -> tuple:
    loc = res.diagnostics["localize"]
    per_q = tuple((iv.diagnostics["stage1"]["target_ranks"], iv.diagnostics["stage1"]["depth"])
                  for iv in res.intervals)
    if "target_ranks" in res.intervals[0].diagnostics:
        per_q += tuple(iv.diagnostics["target_ranks"] for iv in res.intervals)
    # A family's tree (K >= 2) lays its leaves out per stage-1 range, so its depth is a
    # function of stage 1's RELEASED ranges (post-processing, docs/proofs/
    # quantile_segments.md), and the spend is rho up to the rounding of L/sigma^2 at that
    # depth; everything fixed before stage 1 must still be the same for every data set.
    family_tree = "segments" in loc
    tree_depth = None if family_tree else loc.get("tree_depth")
    rho = round(float(res.privacy.rho), 14) if family_tree else res.privacy
    return (loc["alpha"], loc["depth"], tree_depth, per_q, rho)


@pytest.mark.parametrize("method", ["expmech", "binsearch", "cdf", "binsearch_cdf"])
@pytest.mark.parametrize("n", [3, 40, 2000])
def test_today_localised_public_choices_do_not_depend_on_the_data(method, n):
    import warnings as _w

    from dpfair.quantiles import confidence_intervals

    seen = set()
    for i, x in enumerate(_adversarial_same_n(n)):
        with _w.catch_warnings():
            _w.simplefilter("ignore")
            res = confidence_intervals(x, [0.1, 0.5, 0.9], rho=0.5, bounds=BOUNDS,
                                       method=method, rng=i)
        seen.add(_public_part(res))
    assert len(seen) == 1, seen


def test_today_quantile_warnings_are_functions_of_the_release():
    import warnings as _w

    from dpfair.quantiles import confidence_intervals
    from dpfair.quantiles._api import _free_warnings

    for x in _adversarial_same_n(50):
        with _w.catch_warnings():
            _w.simplefilter("ignore")
            res = confidence_intervals(x, [0.5], rho=0.5, bounds=BOUNDS, method="expmech",
                                       rng=0)
        iv = res.intervals[0]
        assert iv.warnings == _free_warnings(iv.low, iv.high, iv.bounds, 0.5, iv.granularity,
                                             True)

"""The localised ExpMech's padded cell mechanism and per-end split ranges (issue 22, item 4).

Claims checked here, each against the exact output law of the executed cell mechanism
(:func:`cell_order_statistic_law`) on adversarial data (ties, clumps at the ends, the
two-clump worst case, n = 1, 2) and every threshold v on a fine grid:

* padded mechanism: given the data, P(low > v) ≤ h(#{x_i ≤ v} − k) and
  P(high < v) ≤ h(k − #{x_i < v}) with h(t) = x_t/(1 + x_t), x_t = C·e^{−εt/2} and the
  padded constant C = (M − 1)/(2Q + 1) (about half the unpadded one); the clump attains it;
* split ranges: the lower end's draw on data clipped into [a, b'] (any b') never misses
  a v ≥ b' and obeys the same bound, with the counts of the UNCLIPPED data, for
  a ≤ v < b' (mirrored for the upper end): the top of the lower end's range is free;
* the public constant K_E/2 bounds the padded constant of every regular range for every
  K_E the width model can choose, coarsened grids included;
* the localised choices (K_E, target ranks, ρ spent) are the same for every data set of
  the same n;
* the padded law moves by at most e^ε on every cell between neighbouring data sets.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import dpfair
from dpfair.median._expmech import CellGrid, cell_order_statistic_law
from dpfair.quantiles._api import (
    EXPMECH_STEPS,
    expmech_split,
    localized_expmech_steps,
)
from tests._expmech_cases import BOUNDS, GRAN, adversarial_datasets, miss_bound
from tests._stats import min_successes


def _ends(grid: CellGrid, sub: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Released low/high of every padded output cell, clipped as expmech_quantile does."""
    q = grid.per_theta
    m = np.arange(-q, grid.n_cells + q)
    lows = np.minimum(np.maximum(sub[0], grid.low + (m - q - 1) * grid.cell), sub[1])
    highs = np.maximum(np.minimum(sub[1], grid.low + (m + q + 2) * grid.cell), sub[0])
    return lows, highs


def _miss_probabilities(law, ends, vs, side):
    order = np.argsort(ends)
    cum = np.concatenate([[0.0], np.cumsum(law[order])])
    if side == "low":  # P(low > v)
        return 1.0 - cum[np.searchsorted(ends[order], vs, side="right")]
    return cum[np.searchsorted(ends[order], vs, side="left")]  # P(high < v)


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
@pytest.mark.parametrize("sub", [(0.0, 1.0), (0.0, 0.55), (0.3, 1.0), (0.25, 0.5)])
def test_padded_split_miss_probability_within_exact_law(eps, sub):
    rng = np.random.default_rng(0)
    grid = CellGrid.for_bounds(sub, (sub[1] - sub[0]) * GRAN)
    c = grid.padded_tail_constant
    assert c < (grid.n_cells - grid.per_theta - 1) / (grid.per_theta + 1)  # below unpadded
    lows, highs = _ends(grid, sub)
    closest = 0.0
    for name, raw in adversarial_datasets(rng, outside=True).items():
        x = np.clip(raw, *sub)  # what the draw sees
        n = x.size
        fine = np.linspace(-0.1, 1.1, 4 * grid.n_cells + 1)
        near = np.concatenate([raw, np.nextafter(raw, -np.inf), np.nextafter(raw, np.inf),
                               list(sub)])
        vs = np.unique(np.concatenate([fine, near]))
        below = np.searchsorted(raw, vs, side="right")  # #{x_i <= v}, UNCLIPPED data
        at_most = np.searchsorted(raw, vs, side="left")  # #{x_i < v}
        for k in range(n + 1):
            law = cell_order_statistic_law(x, k, eps, grid, padded=True)
            assert law.shape == (grid.n_cells + 2 * grid.per_theta,)
            assert abs(law.sum() - 1.0) < 1e-12
            p_low = _miss_probabilities(law, lows, vs, "low")
            p_high = _miss_probabilities(law, highs, vs, "high")
            # the range's top is free for the lower end, its bottom for the upper end
            assert np.all(p_low[vs >= sub[1]] <= 1e-12), (name, k)
            assert np.all(p_high[vs <= sub[0]] <= 1e-12), (name, k)
            inside_l = (vs >= sub[0]) & (vs < sub[1])
            bound_low = miss_bound(below - k, c, eps)
            assert np.all(p_low[inside_l] <= bound_low[inside_l] + 1e-12), (name, k)
            inside_u = (vs > sub[0]) & (vs <= sub[1])
            bound_high = miss_bound(k - at_most, c, eps)
            assert np.all(p_high[inside_u] <= bound_high[inside_u] + 1e-12), (name, k)
            ok = inside_l & (below - k >= 1) & (bound_low > 1e-9)
            if ok.any():
                closest = max(closest, float(np.max(p_low[ok] / bound_low[ok])))
    if sub == (0.0, 1.0):
        assert closest > 0.9  # power: the padded bound is nearly attained (the clump)


def test_padded_clump_attains_the_bound():
    # Ranks 1..k+t in cell 0, the rest in the top cell: the band is exactly 2Q + 1 cells
    # and every other cell sits at offset t, so the miss probability is x_t/(1 + x_t).
    n, k, eps = 40, 12, 1.1
    grid = CellGrid.for_bounds((0.0, 1.0), 1.0 / 32)
    c = grid.padded_tail_constant
    assert c == (grid.n_cells - 1) / (2 * grid.per_theta + 1)
    for t in (1, 3, 6, 10):
        x = np.where(np.arange(n) < k + t, 0.0, 1.0)
        law = cell_order_statistic_law(x, k, eps, grid, padded=True)
        q = grid.per_theta
        p = float(law[2 * q + 1:].sum())  # cells Q + 1.. (entry i is cell i − Q): offset t
        xt = c * math.exp(-eps * t / 2.0)
        assert p == pytest.approx(xt / (1 + xt), rel=1e-9)


@pytest.mark.parametrize("steps", [16, 45, 64, 76, 181, 431, 2048])
def test_padded_constant_below_half_steps_on_every_regular_range(steps):
    # Every R₂ a regular (n, R) can produce: width ≥ step₁/2 ≥ 2^-1001, any magnitude,
    # with θ₂ = fl(w/K_E) for a K_E that need not be a power of two, coarsened included.
    rng = np.random.default_rng(steps)
    coarsened = 0
    for _ in range(1500):
        a = float(rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-290, 300))
        w = max(abs(a) * 2.0 ** rng.uniform(-60, 2), 2.0**-1001)
        b = a + w
        if not (b > a and np.isfinite(b)):
            continue
        grid = CellGrid.for_bounds((a, b), (b - a) / steps)
        coarsened += grid.per_theta == 1
        assert grid.padded_tail_constant < steps / 2.0, (a, b, grid)
    assert coarsened > 50


def test_steps_are_a_public_width_model():
    assert set(EXPMECH_STEPS) >= {16, 64, 128, 2048}
    k_small = localized_expmech_steps(1000, 0.5, 1.3, 0.0245, 200.0)
    k_large = localized_expmech_steps(100_000, 0.5, 1.3, 0.0245, 2000.0)
    assert k_small in EXPMECH_STEPS and k_large > k_small  # more ranks per cell: finer grid


def test_split_is_post_processing_with_a_floor():
    r2 = (1.0, 2.0)
    assert expmech_split(r2, None, 0.01) == (r2, r2)
    assert expmech_split(r2, (1.4, 1.5), 0.01) == ((1.0, 1.5), (1.4, 2.0))
    # a bracket outside R₂ or a sub-range below the floor keeps R₂
    assert expmech_split(r2, (0.2, 0.3), 0.01) == (r2, (1.0, 2.0))
    assert expmech_split(r2, (1.0, 1.005), 0.01) == (r2, (1.0, 2.0))


def _adversarial(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [np.full(n, 0.5), np.zeros(n), np.ones(n),
            np.concatenate([np.zeros(n // 2), np.ones(n - n // 2)]), rng.uniform(size=n),
            np.clip(rng.normal(0.5, 1e-6, size=n), 0.0, 1.0)]


@pytest.mark.parametrize("n", [3, 40, 2000])
def test_localised_expmech_choices_do_not_depend_on_the_data(n):
    seen = set()
    for i, x in enumerate(_adversarial(n)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = dpfair.quantiles.confidence_intervals(x, [0.1, 0.5, 0.9], rho=0.5,
                                                        bounds=BOUNDS, method="expmech",
                                                        rng=i)
        per_q = tuple((iv.diagnostics["steps"], iv.diagnostics["tail_constant"],
                       iv.diagnostics["target_ranks"]) for iv in res.intervals)
        seen.add((*per_q, res.privacy.rho))
    assert len(seen) == 1, seen


def test_localised_expmech_ledger_sums_to_rho():
    x = np.random.default_rng(1).lognormal(0.4, 1.0, 1000)
    r = dpfair.quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=(-5, 15),
                                             method="expmech", rng=3)
    assert r.privacy.rho == pytest.approx(0.5, rel=1e-12)
    assert r.privacy.rho <= 0.5
    lo_r, hi_r = r.diagnostics["ranges"]
    assert r.diagnostics["range"][0] == lo_r[0] and r.diagnostics["range"][1] == hi_r[1]
    assert lo_r[1] < r.diagnostics["range"][1] and hi_r[0] > r.diagnostics["range"][0]
    assert lo_r[0] <= r.low <= lo_r[1] and hi_r[0] <= r.high <= hi_r[1]


# A population with a gap at the median (two atoms, x_q = 0.2 for q ≤ 1/2): the design
# that attains the worst-case tail, with stage 1 bracketing the gap. Coverage with
# exact binomial bounds.
GAP = stats.rv_discrete(values=([0.2, 0.8], [0.5, 0.5]))


def _gap_coverage(n: int, q: float, reps: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    truth = float(GAP.ppf(q))
    hits = 0
    for _ in range(reps):
        x = GAP.rvs(size=n, random_state=rng).astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpfair.quantiles.confidence_interval(x, q, rho=0.5, bounds=(-5.0, 15.0),
                                                     method="expmech", rng=rng)
        hits += r.low <= truth <= r.high
    return hits


@pytest.mark.statistical
@pytest.mark.parametrize("q", [0.3, 0.5])
def test_gap_population_coverage(q):
    reps = 150
    assert _gap_coverage(300, q, reps, 11 + int(10 * q)) >= min_successes(reps, 0.95)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("q", [0.3, 0.5, 0.7])
@pytest.mark.parametrize("n", [100, 1000])
def test_gap_population_coverage_full(q, n):
    reps = 1500
    assert _gap_coverage(n, q, reps, 101 + n + int(10 * q)) >= min_successes(reps, 0.95)


@pytest.mark.parametrize("k", [0, 7, 20, 40])
def test_padded_law_neighbour_ratio_within_eps(k):
    # Attacker: replace one record by an extreme or a tie-maker; the padded law's output
    # probabilities may move by at most e^eps on every cell (pure eps-DP as executed).
    rng = np.random.default_rng(9)
    n, eps = 40, 1.3
    grid = CellGrid.for_bounds((0.0, 1.0), 1.0 / 48)
    for base in (np.sort(rng.uniform(0, 1, n)), np.sort(np.r_[np.zeros(20), np.ones(20)])):
        p0 = cell_order_statistic_law(base, k, eps, grid, padded=True)
        for i in (0, n // 2, n - 1):
            for new in (0.0, 0.5, 1.0, float(base[min(i + 1, n - 1)])):
                y = base.copy()
                y[i] = new
                p1 = cell_order_statistic_law(np.sort(y), k, eps, grid, padded=True)
                assert np.all(p0 > 0) and np.all(p1 > 0)
                assert np.max(np.abs(np.log(p0 / p1))) <= eps * (1 + 1e-9)

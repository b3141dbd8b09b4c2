"""Privacy attacks on the localised ExpMech quantile intervals (padded cells, split ranges).

* **Public choices and the ledger.** For adversarial data of the same n (every record on
  a bound, −0.0, the smallest subnormal, all records outside R on both sides, one ulp
  above a round number, two clumps, uniform) the release must make the same K_E, stage-1
  and stage-2 target ranks, the same split/no-split decision and spend the same ρ; the
  ledger must add up: Σ stage-1 + split search (exactly 5 % of ρ/K per level that
  splits) + Σ ExpMech draws = ``privacy.rho`` ≤ ρ. Checked at n = 2, 50, 51, 333,
  q = 0.01, 0.99, 0.5 and a pair, ρ = 1e-4, 0.5, 50.
* **The executed padded sampler is the law.** Draws of
  :func:`sample_order_statistic_cell` (``padded=True``, the windowed exact sampler with
  its outside-mass bound over M + 2Q cells) against :func:`cell_order_statistic_law`:
  chi-square, fails w.p. < 1e-6 when correct. Data that make the window bind (n = 3000,
  clumps), n = 2 with k = 0 and k = n (the band touching a padded end).
* **Neighbour ratios on split ranges.** On a split sub-range (the data clipped into it,
  as the release does), replace one record by a last-bit neighbour, −0.0, a value on a
  cell edge or one ulp below it, a value outside the sub-range, or the sub-range's
  ends; every output cell's probability (padded cells included) may move by at most
  e^ε. n = 1, 2 and k = 0, n included.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import dpfair
from dpfair.median._expmech import (
    CellGrid,
    cell_order_statistic_law,
    sample_order_statistic_cell,
)
from tests._stats import FAIL_PROB, chisquare_pvalue

BOUNDS = (-5.0, 15.0)


def _datasets(n: int) -> list[np.ndarray]:
    lo, hi = BOUNDS
    rng = np.random.default_rng(n)
    return [np.full(n, lo), np.full(n, hi), np.full(n, -0.0), np.full(n, 5e-324),
            np.r_[np.full(n // 2, lo - 1e6), np.full(n - n // 2, hi + 1e6)],
            rng.uniform(lo, hi, n), np.full(n, np.nextafter(0.2, 1.0)),
            np.r_[np.zeros(n // 2), np.ones(n - n // 2)]]


@pytest.mark.parametrize("n", [2, 50, 51, 333])
def test_choices_public_and_ledger_adds_up(n):
    for qs, rho in itertools.product([[0.01], [0.99], [0.5], [0.05, 0.95]],
                                     [1e-4, 0.5, 50.0]):
        seen = set()
        for i, x in enumerate(_datasets(n)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = dpfair.quantiles.confidence_intervals(x, qs, rho=rho, bounds=BOUNDS,
                                                          method="expmech", rng=i)
            k = len(qs)
            s1 = sum(iv.diagnostics["stage1"]["rho"] for iv in r.intervals)
            draws = sum(v for iv in r.intervals for _, v in iv.diagnostics["ledger"])
            n_split = sum(iv.diagnostics["split"] is not None for iv in r.intervals)
            split = float(r.privacy.rho) - s1 - draws
            assert split == pytest.approx(0.05 * rho * n_split / k, rel=1e-9, abs=1e-12 * rho)
            assert r.privacy.rho <= rho * (1 + 1e-12)
            for iv in r.intervals:
                assert BOUNDS[0] <= iv.low <= iv.high <= BOUNDS[1]
            per_q = tuple((iv.diagnostics["steps"], iv.diagnostics["target_ranks"],
                           iv.diagnostics["stage1"]["target_ranks"],
                           iv.diagnostics["split"] is None) for iv in r.intervals)
            seen.add((*per_q, r.privacy.rho))
        assert len(seen) == 1, (n, qs, rho, seen)


def _sampler_cases():
    rng = np.random.default_rng(3)
    clump = np.sort(np.clip(np.r_[np.zeros(1490), np.full(20, 0.25), np.ones(1490)], 0, 0.5))
    return [(1500, 0.4, (0.0, 0.5), clump),
            (10, 0.4, (0.0, 1.0), np.sort(np.r_[np.zeros(5), rng.uniform(0, 1, 2995)])),
            (0, 1.0, (0.2, 0.3), np.array([0.2, 0.3])),
            (2, 1.0, (0.2, 0.3), np.array([0.2, 0.3]))]


@pytest.mark.statistical
@pytest.mark.parametrize("case", range(4))
def test_padded_sampler_draws_the_exact_law(case):
    k, eps, sub, x = _sampler_cases()[case]
    rng = np.random.default_rng(100 + case)
    grid = CellGrid.for_bounds(sub, (sub[1] - sub[0]) / 16)
    law = cell_order_statistic_law(x, k, eps, grid, padded=True)
    draws = np.array([sample_order_statistic_cell(x, k, eps, grid, rng, padded=True)
                      for _ in range(12_000)]) + grid.per_theta
    assert draws.min() >= 0 and draws.max() < law.size
    assert chisquare_pvalue(draws, law) > FAIL_PROB


def _replacements(grid: CellGrid, sub: tuple[float, float], old: float) -> list[float]:
    lo, hi = sub
    edge = grid.low + 7 * grid.cell
    return [float(np.nextafter(old, np.inf)), float(np.nextafter(old, -np.inf)), -0.0,
            edge, float(np.nextafter(edge, -np.inf)), lo, hi, lo - 1.0, hi + 1.0,
            float(np.nextafter(hi, -np.inf)), 0.5 * (lo + hi)]


@pytest.mark.parametrize("sub", [(-0.5, 0.3), (0.3, 1.0), (0.0, 2.0 ** -20)])
@pytest.mark.parametrize("n", [1, 2, 9])
def test_padded_split_neighbour_ratio_within_eps(sub, n):
    eps = 1.1
    grid = CellGrid.for_bounds(sub, (sub[1] - sub[0]) / 45)  # a non-power-of-two K_E
    rng = np.random.default_rng(n)
    bases = [np.full(n, sub[0]), np.full(n, sub[1]),
             np.sort(rng.uniform(sub[0] - 0.2, sub[1] + 0.2, n))]
    worst = 0.0
    for base, k in itertools.product(bases, sorted({0, n // 2, n})):
        clipped = np.sort(np.clip(base, *sub))
        p0 = cell_order_statistic_law(clipped, k, eps, grid, padded=True)
        for i in range(n):
            for new in _replacements(grid, sub, float(base[i])):
                y = base.copy()
                y[i] = new
                p1 = cell_order_statistic_law(np.sort(np.clip(y, *sub)), k, eps, grid,
                                              padded=True)
                assert np.all(p0 > 0) and np.all(p1 > 0)
                worst = max(worst, float(np.max(np.abs(np.log(p0 / p1)))))
    assert worst <= eps * (1 + 1e-9)
    assert worst > 0.4 * eps  # power: some neighbour moves a cell by ≈ ε/2

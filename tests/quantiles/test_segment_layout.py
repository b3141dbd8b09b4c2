"""The several-quantile tree's leaf layout: one dyadic grid per stage-1 range.

What an attacker tries against it:

* the layout is a public function of stage 1's released ranges and public values, so it
  is tested as a pure function (merging, allocation, edges), never of the data;
* a record moves one leaf count by one whatever the layout (the tree's sensitivity);
* sorted data and count queries (files larger than memory) give the same leaf counts,
  including grids finer than the doubles (inner points that round onto a segment's end),
  atoms on grid points and data outside the hull;
* simultaneous coverage of the released family on fresh samples, with ranges that merge
  (close quantiles, atoms) or stay apart, heavy tails and ties, against an exact binomial
  bound at level 1e-6 (tests/_stats.py);
* seeded families in memory and from count queries are bit-identical.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from scipy import stats

import dpfair
from dpfair._errors import InvalidParameterError
from dpfair.mechanisms import leaf_counts_sorted, leaf_edges
from dpfair.quantiles._api import (
    TREE_DEPTHS,
    _Queries,
    _Sorted,
    localized_segment_layout,
)
from dpfair.quantiles._segments import (
    SegmentLayout,
    allocate_depths,
    leaves_from_cumulative,
    merge_ranges,
)
from tests._stats import min_successes


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8],
                          "little")


# ------------------------------------------------------------------ pure layout
def test_merge_ranges_overlapping_and_touching() -> None:
    merged, member = merge_ranges([(5.0, 6.0), (0.0, 1.0), (0.5, 2.0), (2.0, 3.0), (7.0, 8.0)])
    assert merged == [(0.0, 3.0), (5.0, 6.0), (7.0, 8.0)]
    assert member == [1, 0, 0, 0, 2]
    with pytest.raises(InvalidParameterError, match="empty"):
        merge_ranges([(1.0, 1.0)])


@pytest.mark.parametrize("n_seg", [1, 2, 3, 4, 5, 7, 8, 9])
@pytest.mark.parametrize("depth", [3, 6, 11, 12])
def test_allocation_fits_and_refines_the_widest(n_seg: int, depth: int) -> None:
    widths = [float(1 + (7 * i) % 5) for i in range(n_seg)]
    alloc = allocate_depths(widths, depth)
    if not any(n_seg * (1 << d) + n_seg - 1 <= 1 << depth for d in range(1, depth + 1)):
        assert alloc is None
        return
    assert alloc is not None
    used = sum(1 << d for d in alloc) + n_seg - 1  # bins plus one leaf per gap
    assert used <= 1 << depth
    # maximal: no single further doubling fits
    assert all(used + (1 << d) > 1 << depth for d in alloc)
    if n_seg == 1:
        assert alloc == [depth]  # one segment: the hull's uniform grid of the k = 1 tree


def test_edges_and_bin_widths() -> None:
    layout = SegmentLayout(depth=6, segments=((0.0, 1.0, 4), (2.0, 4.0, 3), (9.0, 10.0, 3)),
                           of_quantile=(0, 1, 1, 2))
    e = layout.edges()
    assert e.shape == (65,) and e[0] == 0.0 and e[-1] == 10.0
    assert np.all(np.diff(e) >= 0)
    inner = layout.inner_points()
    assert inner.size == 15 + 7 + 7 + 2 * 2  # the ends shared with the two gaps
    assert set(np.round(inner, 12)) >= {0.0625, 1.0, 2.0, 2.25, 4.0, 9.0, 9.125}
    assert layout.bin_width(0) == 1.0 / 16 and layout.bin_width(2) == 2.0 / 8
    with pytest.raises(InvalidParameterError, match="more than 2"):
        SegmentLayout(depth=3, segments=((0.0, 1.0, 3), (2.0, 3.0, 2)), of_quantile=(0, 1))


def test_planner_reads_no_data_and_is_deterministic() -> None:
    ranges = [(1.0, 1.2), (1.9, 2.3), (3.0, 3.6), (3.5, 4.0)]  # the last two merge
    ranks1 = [(9000, 11000), (49000, 51000), (88000, 90500), (89500, 91000)]
    a = localized_segment_layout(100_000, [0.1, 0.5, 0.89, 0.9], 0.45, 0.006, ranges, ranks1)
    b = localized_segment_layout(100_000, [0.1, 0.5, 0.89, 0.9], 0.45, 0.006, ranges, ranks1)
    assert a == b
    assert len(a.segments) == 3 and a.of_quantile == (0, 1, 2, 2)
    assert a.depth in TREE_DEPTHS
    assert a.segments[2][:2] == (3.0, 4.0)


# ------------------------------------------------------------------ leaf counts
def _fake_queries(x_sorted: np.ndarray) -> _Queries:
    """Count queries answered from the sorted data as a file back end would: histograms
    of the data clipped into the asked sub-range, and #{x ≤ g}."""
    def histogram(bounds: tuple[float, float], depth: int) -> np.ndarray:
        return leaf_counts_sorted(x_sorted, bounds, depth)

    def count(g: float) -> int:
        return int(np.searchsorted(x_sorted, g, side="right"))

    return _Queries(x_sorted.size, count, histogram)


def _brute_leaves(x: np.ndarray, layout: SegmentLayout) -> np.ndarray:
    lo, hi = layout.hull
    c = np.clip(x, lo, hi)
    g = layout.inner_points()
    cum = np.array([int(np.sum(c <= v)) for v in g], dtype=np.int64)
    return leaves_from_cumulative(cum, x.size, layout.depth)


@pytest.mark.parametrize("case", ["plain", "atoms-on-grid", "outside", "sub-ulp"])
def test_sorted_and_queries_give_the_same_leaves(case: str) -> None:
    rng = np.random.default_rng(_seed("leaves", case))
    if case == "sub-ulp":  # a segment four ulps wide at depth 5: inner points round onto hi
        a = 1.0
        b = math.nextafter(math.nextafter(math.nextafter(math.nextafter(a, 2), 2), 2), 2)
        segments: tuple[tuple[float, float, int], ...] = ((0.0, 0.5, 4), (a, b, 5), (2.0, 3.0, 4))
        x = np.concatenate([rng.uniform(-1, 4, 300), np.full(50, a), np.full(50, b),
                            np.full(20, math.nextafter(a, 2))])
    else:
        segments = ((0.0, 1.0, 5), (2.5, 3.0, 4), (7.0, 9.0, 5))
        if case == "plain":
            x = rng.uniform(0.0, 9.0, 2000)
        elif case == "atoms-on-grid":
            grid = np.concatenate([leaf_edges((lo, hi), d) for lo, hi, d in segments])
            x = rng.choice(grid, 3000)
        else:
            x = rng.standard_cauchy(2000) * 5.0 + 4.0  # far outside the hull, both sides
    x = np.sort(x)
    layout = SegmentLayout(depth=7, segments=segments, of_quantile=(0, 1, 2))
    mem = _Sorted(x).segment_leaves(layout)
    ooc = _fake_queries(x).segment_leaves(layout)
    assert np.array_equal(mem, ooc)
    assert np.array_equal(mem, _brute_leaves(x, layout))
    assert int(mem.sum()) == x.size and int(mem.min()) >= 0
    n_real = layout.inner_points().size + 1
    assert not mem[n_real:].any()  # the appended leaves are empty for every data set


def test_a_record_moves_one_leaf_by_one() -> None:
    rng = np.random.default_rng(_seed("neighbour"))
    layout = SegmentLayout(depth=8, segments=((0.0, 1.0, 6), (2.0, 2.5, 5), (4.0, 6.0, 6)),
                           of_quantile=(0, 1, 2))
    x = rng.uniform(-1.0, 7.0, 500)
    base = _Sorted(np.sort(x)).segment_leaves(layout)
    for i in range(40):  # replace one record, including with values on grid points / bounds
        y = x.copy()
        y[i % x.size] = rng.choice([rng.uniform(-3, 9), 2.0, 1.0, 6.0, 0.0, 2.25])
        other = _Sorted(np.sort(y)).segment_leaves(layout)
        diff = np.abs(other - base)
        assert int(diff.sum()) in (0, 2) and int(diff.max()) <= 1


# ------------------------------------------------------------------ end to end
@pytest.mark.parametrize("method", ["cdf", "binsearch_cdf"])
@pytest.mark.parametrize("qs", [[0.1, 0.25, 0.5, 0.75, 0.9], [0.5, 0.51], [0.02, 0.98]])
def test_memory_and_queries_families_identical(method: str, qs: list[float]) -> None:
    x = np.sort(np.random.default_rng(_seed("ooc", method, qs)).lognormal(0.4, 1.0, 20_000))
    mem = dpfair.quantiles.confidence_intervals(x, qs, rho=0.5, bounds=(-5, 15),
                                                method=method, rng=5)
    q = _fake_queries(x)
    ooc = dpfair.quantiles.confidence_intervals_from_queries(
        x.size, q._count, q._histogram, qs, rho=0.5, bounds=(-5, 15), method=method, rng=5)
    assert [(i.low, i.high) for i in mem.intervals] == [(i.low, i.high) for i in ooc.intervals]
    assert mem.privacy == ooc.privacy


def test_a_no_rank_end_keeps_the_hull_layout() -> None:
    """q = 0.001 at n = 20 000: stage 1 has no rank for its lower end (public), its range
    reaches the public bound, and the family keeps the former uniform grid over the hull
    (tests/attacks/test_today5_quantile_segments.py: the per-range layout was ~5x wider
    there)."""
    x = np.random.default_rng(4).uniform(0.0, 10.0, 20_000)
    res = dpfair.quantiles.confidence_intervals(x, [0.001, 0.5, 0.9], rho=0.5,
                                                bounds=(-5, 15), method="cdf", rng=1)
    assert None in res.intervals[0].diagnostics["stage1"]["target_ranks"]
    assert "segments" not in res.diagnostics["localize"]
    ranked = dpfair.quantiles.confidence_intervals(x, [0.1, 0.5, 0.9], rho=0.5,
                                                   bounds=(-5, 15), method="cdf", rng=1)
    assert "segments" in ranked.diagnostics["localize"]


def test_family_reports_segments_and_spends_rho() -> None:
    x = np.random.default_rng(2).lognormal(0.4, 1.0, 50_000)
    res = dpfair.quantiles.confidence_intervals(x, [0.1, 0.5, 0.9], rho=0.5, bounds=(-5, 15),
                                                method="cdf", rng=3)
    assert res.privacy.rho is not None and 0.5 - 1e-12 <= res.privacy.rho <= 0.5
    for iv in res.intervals:
        assert iv.low < iv.high


DESIGNS = {
    "lognormal": (stats.lognorm(s=1.0, scale=1.5), [0.1, 0.25, 0.5, 0.75, 0.9]),
    "close-levels": (stats.lognorm(s=1.0, scale=1.5), [0.45, 0.5, 0.55]),
    "poisson-ties": (stats.poisson(3.5), [0.1, 0.5, 0.6, 0.9]),
    "pareto-heavy": (stats.pareto(b=1.1), [0.1, 0.5, 0.9]),
}


def _family_hits(design: str, method: str, n: int, reps: int) -> int:
    law, qs = DESIGNS[design]
    truth = law.ppf(qs)
    rng = np.random.default_rng(_seed("family-cov", design, method, n))
    hits = 0
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        res = dpfair.quantiles.confidence_intervals(x, qs, rho=0.5, bounds=(-5.0, 15.0),
                                                    method=method, rng=rng)
        hits += all(iv.low <= t <= iv.high for iv, t in zip(res, truth, strict=True))
    return hits


@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", ["cdf", "binsearch_cdf"])
@pytest.mark.parametrize("design", list(DESIGNS))
def test_simultaneous_coverage_segmented(method: str, design: str) -> None:
    reps = 300
    hits = _family_hits(design, method, 600, reps)
    assert hits >= min_successes(reps, 0.95)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")
@pytest.mark.parametrize("method", ["cdf", "binsearch_cdf"])
@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("n", [200, 5000])
def test_simultaneous_coverage_segmented_full(method: str, design: str, n: int) -> None:
    reps = 1500
    hits = _family_hits(design, method, n, reps)
    assert hits >= min_successes(reps, 0.95)

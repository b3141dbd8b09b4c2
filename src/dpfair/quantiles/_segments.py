r"""The leaf layout of the localised tree for several quantiles: a fine grid per range.

With K ≥ 2 quantiles, stage 1 of the localised tree methods returns one range
R₂(q) = [L₁(q), U₁(q)] per quantile (:func:`dpfair.quantiles._api._localized`). A
single uniform grid over their hull spends its leaves on the stretches between the
ranges, where no interval end can fall unless stage 1 missed (an event already charged
to α₁). This module lays the tree's 2^D leaves out instead as one uniform dyadic grid per
range:

* the ranges are sorted and merged where they overlap or touch (a *segment* s is a
  maximal union [lo_s, hi_s]);
* segment s gets the uniform dyadic grid of :func:`~dpfair.mechanisms.tree.leaf_edges`
  on [lo_s, hi_s] at depth d_s, its ends included;
* the tree's leaves are the bins between consecutive points of the union of the grids, so
  the stretch between two segments (hi_{s−1}, lo_s] is one leaf of its own, and zero
  leaves are appended (at the hull's upper end) up to 2^D. A segment's ends are grid
  points because an interval end can sit on them (a level whose stage-1 range is tight
  around an atom, or a range that reaches its stage-1 bound).

Everything here is a function of stage 1's released ranges and of public values, so for
stage 2 the layout is a public grid: a record changes one leaf count by one whatever the
layout (the tree's sensitivity and privacy are unchanged), and the coverage argument of
the envelope test, which holds for any grid fixed before stage 2's noise is drawn, holds
as it does for the hull's uniform grid (``docs/proofs/quantile_segments.md``).

The leaf counts are #{x ≤ g} differences at the inner points g, with #{x ≤ g} = n at any
g ≥ the hull's upper end (the data clipped into the hull, as for the uniform tree): sorted
data read them by binary search, count queries by one histogram per segment
(:func:`cumulative_from_histogram`), the same integers either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.mechanisms import leaf_edges

__all__ = [
    "SegmentLayout",
    "allocate_depths",
    "cumulative_from_histogram",
    "leaves_from_cumulative",
    "merge_ranges",
]


def merge_ranges(ranges: Sequence[tuple[float, float]]
                 ) -> tuple[list[tuple[float, float]], list[int]]:
    """Sorted maximal unions of ``ranges`` and, per range, the index of its union.

    Two ranges are merged when they overlap or touch (the next starts at or before the
    current union's end), so the unions are disjoint with gaps of positive length.
    """
    if not ranges:
        raise InvalidParameterError("merge_ranges: need at least one range.")
    order = sorted(range(len(ranges)), key=lambda i: (ranges[i][0], ranges[i][1]))
    merged: list[list[float]] = []
    member = [0] * len(ranges)
    for i in order:
        lo, hi = float(ranges[i][0]), float(ranges[i][1])
        if not lo < hi:
            raise InvalidParameterError(f"merge_ranges: range {i} = ({lo!r}, {hi!r}) is empty.")
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
        member[i] = len(merged) - 1
    return [(a, b) for a, b in merged], member


def _leaves_used(depths: Sequence[int]) -> int:
    """Σ_s 2^{d_s} + (S − 1): every segment's bins and one leaf per gap between two."""
    return sum(1 << d for d in depths) + len(depths) - 1


def allocate_depths(widths: Sequence[float], depth: int) -> list[int] | None:
    """Per-segment depths d_s with Σ_s 2^{d_s} + (S − 1) ≤ 2^D (``None``: cannot fit).

    Every segment starts at the largest common d ≥ 1 that fits; then, while a doubling
    still fits, the segment with the widest bins (``widths[s]`` / 2^{d_s}, the first on
    ties) is refined once. A public function of its arguments.
    """
    s = len(widths)
    if s < 1:
        raise InvalidParameterError("allocate_depths: need at least one segment.")
    cap = 1 << depth
    base = depth - (s - 1).bit_length()  # ⌈log₂ S⌉ = bit_length(S − 1): S·2^d ≤ 2^D
    while base >= 1 and _leaves_used([base] * s) > cap:
        base -= 1
    if base < 1:
        return None
    d = [base] * s
    total = _leaves_used(d)
    while True:
        best, best_bin = -1, -1.0
        for i in range(s):
            if total + (1 << d[i]) <= cap:
                b = float(widths[i]) / float(1 << d[i])
                if b > best_bin:
                    best, best_bin = i, b
        if best < 0:
            return d
        total += 1 << d[best]
        d[best] += 1


@dataclass(frozen=True)
class SegmentLayout:
    """The public leaf layout: 2^D leaves over the segments' dyadic grids.

    Attributes
    ----------
    depth : int
        D: the tree has 2^D leaves.
    segments : tuple of (lo_s, hi_s, d_s)
        The disjoint, sorted segments and each one's grid depth.
    of_quantile : tuple of int
        The segment of each quantile's stage-1 range, in the caller's order.
    """

    depth: int
    segments: tuple[tuple[float, float, int], ...]
    of_quantile: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.segments:
            raise InvalidParameterError("SegmentLayout: need at least one segment.")
        if _leaves_used([d for _, _, d in self.segments]) > 1 << self.depth:
            raise InvalidParameterError("SegmentLayout: the segments need more than 2^D leaves.")

    @property
    def hull(self) -> tuple[float, float]:
        """(lo_1, hi_S): the data are counted as if clipped into it."""
        return self.segments[0][0], self.segments[-1][1]

    def inner_points(self) -> NDArray[np.float64]:
        """The grid points strictly between the hull's ends, in increasing order: each
        segment's inner points and the ends it shares with a gap."""
        parts = []
        last = len(self.segments) - 1
        for s, (lo, hi, d) in enumerate(self.segments):
            g = leaf_edges((lo, hi), d)
            parts.append(g[1 if s == 0 else 0 : g.size - 1 if s == last else g.size])
        return np.concatenate(parts)

    def edges(self) -> NDArray[np.float64]:
        """The 2^D + 1 leaf edges: the hull's low end, the inner points, then the hull's high
        end repeated for the appended (always empty) leaves."""
        lo, hi = self.hull
        inner = self.inner_points()
        out = np.full((1 << self.depth) + 1, hi, dtype=np.float64)
        out[0] = lo
        out[1 : 1 + inner.size] = inner
        return out

    def bin_width(self, quantile: int) -> float:
        """The grid step of the segment holding quantile ``quantile``'s range."""
        lo, hi, d = self.segments[self.of_quantile[quantile]]
        return (hi - lo) / float(1 << d)


def leaves_from_cumulative(cum: NDArray[np.int64], n: int, depth: int) -> NDArray[np.int64]:
    """Leaf counts from #{x ≤ g} at the inner points (non-decreasing, within [0, n]),
    with zero leaves appended up to 2^D."""
    c = np.asarray(cum, dtype=np.int64)
    if c.size + 1 > 1 << depth:
        raise InvalidParameterError("leaves_from_cumulative: more inner points than 2^D − 1.")
    out = np.zeros(1 << depth, dtype=np.int64)
    full = np.concatenate(([0], c, [n]))
    leaves = np.diff(full)
    if leaves.size and int(leaves.min()) < 0:
        raise InvalidParameterError("leaves_from_cumulative: counts must be non-decreasing.")
    out[: leaves.size] = leaves
    return out


def cumulative_from_histogram(layout: SegmentLayout, n: int,
                              histogram: Callable[[tuple[float, float], int], NDArray[np.int64]],
                              count_at_most: Callable[[float], int]) -> NDArray[np.int64]:
    """#{x ≤ g} at the layout's inner points from one clipped histogram per segment.

    ``histogram((lo_s, hi_s), d_s)`` returns the 2^{d_s} leaf counts of the data clipped
    into the segment; for a grid point lo_s < g < hi_s, #{clip(x) ≤ g} = #{x ≤ g}, the
    cumulative sum. The segments' ends shared with a gap, and any grid point that rounds
    onto one of them (a grid finer than the doubles there), are counted by
    ``count_at_most(g)``; every point at or past the hull's upper end counts n: the
    integers the sorted data give by binary search.
    """
    hull_hi = layout.hull[1]
    parts: list[NDArray[np.int64]] = []
    last = len(layout.segments) - 1
    for s, (lo, hi, d) in enumerate(layout.segments):
        h = np.asarray(histogram((lo, hi), d), dtype=np.int64)
        if h.shape != (1 << d,) or int(h.sum()) != n:
            raise InvalidParameterError(
                f"histogram: expected {1 << d} counts summing to n={n} for the segment "
                f"({lo!r}, {hi!r}) at depth {d}; the counts provider must return the leaf "
                "counts of the data clipped into the sub-range.")
        g = leaf_edges((lo, hi), d)
        cum = np.empty(g.size, dtype=np.int64)
        cum[1:-1] = np.cumsum(h)[:-1]
        for j in [0, g.size - 1, *np.flatnonzero((g[1:-1] <= lo) | (g[1:-1] >= hi)) + 1]:
            cum[j] = n if g[j] >= hull_hi else int(count_at_most(float(g[j])))
        parts.append(cum[1 if s == 0 else 0 : g.size - 1 if s == last else g.size])
    return np.concatenate(parts)

r"""ExpMech: two exponential-mechanism order statistics (paper 004, §3 and supplement B).

Mechanism for a target rank k on the public range R = [a, b] with granularity θ
-----------------------------------------------------------------------------------
Data are clipped into R (a copy; a median inside R keeps its rank) and sorted. With
c(t) = #{i : x_i ≤ t}, the score of an output r ∈ R is

.. math:: s_k(r) = -\max\{0,\; k - c(r + θ),\; c(r - θ) - k\}.

Each c(·) changes by at most 1 when one record is replaced, so s_k has sensitivity 1.
Equivalently: move the k smallest points down by θ and the others up by θ (clipping to R),
call the results y_1 ≤ … ≤ y_n and set y_0 = a, y_{n+1} = b; then s_k = −|j − k| on the
piece [y_j, y_{j+1}). The density ∝ exp(ε·s_k/2) is piecewise constant over ≤ n + 1 pieces,
so its law is exact (:class:`~dpfair.mechanisms.PiecewiseConstantLaw`) and sampling costs
O(n) after the sort.

Tail bound (data-free). The score-0 band is [x_(k) − θ, x_(k+1) + θ) ∩ R. Away from the
ends of R it is at least 2θ wide; when x_(k) and x_(k+1) both sit on an end of R it shrinks
to θ, so the true minimum width is w = θ. The set {s_k ≤ −t} has Lebesgue measure at most
|R| − w and density ratio e^{−εt/2} to the band, hence

.. math:: \mathrm{tail}(t) = P(s_k(A) ≤ -t) ≤ \min\{1, C e^{-εt/2}\},\qquad C = (|R| - θ)/θ.

Coverage (conditioning on B = rank of med(P) ~ Bin(n, 1/2)). Given B = m, med(P) lies
strictly between x_(m) and x_(m+1) (a.s. for continuous P).

* Lower end L = A_L − θ fails iff A_L − θ > med > x_(m), which forces c(A_L − θ) ≥ m and so
  s_{kL}(A_L) ≤ −(m − kL). For m ≤ kL we bound the failure probability by 1 (for m = kL
  the band itself reaches above the median); for m > kL by tail(m − kL).
* Upper end U = A_U + θ fails iff A_U + θ < med < x_(m+1), which forces c(A_U + θ) ≤ m and
  so s_{kU}(A_U) ≤ −(kU − m): bounded by 1 for m ≥ kU and by tail(kU − m) otherwise.

Hence P(L > med) ≤ F(kL) = P(B ≤ kL) + Σ_{m>kL} P(B=m)·tail(m − kL) and, by B ↔ n − B,
P(U < med) ≤ F(n − kU). We take kL the largest rank with F(kL) ≤ α/2 and kU = n − kL
(:func:`dpfair.median._ranks.expmech_lower_failure` computes F for all ranks in O(n)).
Off-by-one check: with no privacy noise and θ → 0, F(k) = P(B ≤ k), so kL is one below
the classical rank (the mechanism for rank k returns a point of [x_(k), x_(k+1))).

As executed (THREATS.md rule 6, ``docs/floating_point.md``). The draws above are real
arithmetic; the released interval runs the same mechanism on the public cell grid of
:class:`CellGrid` (records enter only through integer cell indices, the ends are public
grid points), see :func:`sample_order_statistic_cell` and :func:`expmech_interval`.

Privacy. Each draw is the exponential mechanism with ε = 2·sqrt(ρ) on a sensitivity-1
score: pure ε-DP and, by the bounded-range property, ε²/8 = ρ/2-zCDP (Cesar & Rogers
2021). Two draws compose to ρ-zCDP. The range and θ are public; the final interval is
clipped to R (post-processing: the median is promised to lie in R).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InsufficientDataError, InvalidParameterError
from dpfair.mechanisms import (
    ExponentialMechanism,
    PieceMasses,
    PiecewiseConstantLaw,
    choose_windowed,
    exact_rate,
)
from dpfair.median._ranks import expmech_lower_target
from dpfair.privacy import Accountant, Budget

__all__ = [
    "CellGrid",
    "SelectedSample",
    "SortedCounts",
    "cell_order_statistic_law",
    "expmech_interval",
    "expmech_target_ranks",
    "order_statistic_law",
    "sample_order_statistic",
    "sample_order_statistic_cell",
]


def order_statistic_law(
    x_sorted: NDArray[np.float64],
    k: int,
    epsilon: float,
    bounds: tuple[float, float],
    granularity: float,
    shift_up: float | None = None,
) -> PiecewiseConstantLaw:
    """Exact output law of the granular exponential mechanism for the rank-``k`` statistic.

    ``x_sorted`` must already be clipped into ``bounds`` and sorted (callers in this
    package guarantee it); ``k`` ranges over 0..n. The k smallest points move down by
    ``granularity`` and the others up by ``shift_up`` (default: ``granularity``); the
    cell mechanism (:func:`sample_order_statistic_cell`) uses shifts Q and Q + 1.
    """
    a, b = bounds
    up = granularity if shift_up is None else shift_up
    n = x_sorted.size
    shifted = np.empty(n + 2, dtype=np.float64)
    shifted[0] = a
    shifted[n + 1] = b
    shifted[1 : k + 1] = x_sorted[:k] - granularity
    shifted[k + 1 : n + 1] = x_sorted[k:] + up
    np.clip(shifted, a, b, out=shifted)
    scores = -np.abs(np.arange(n + 1, dtype=np.float64) - k)
    return ExponentialMechanism(epsilon).law(shifted, scores)


#: The window of the exact windowed sampler leaves outside at most 10^-margin of the
#: score-0 band's mass (the exact O(n) branch runs with at most that probability).
_WINDOW_MARGIN_DIGITS = 12.0


class SortedCounts:
    """A sorted sample stored as (distinct values, counts): O(#values) memory.

    Used by the aggregated (histogram) path, where each record has been replaced by the
    upper edge of its bin. ``take`` returns order statistics by 0-based rank.
    """

    def __init__(self, values: NDArray[np.float64], counts: NDArray[np.int64]) -> None:
        keep = np.asarray(counts) > 0
        self.values = np.asarray(values, dtype=np.float64)[keep]
        self.counts = np.asarray(counts, dtype=np.int64)[keep]
        self.cum = np.cumsum(self.counts)
        self.size = int(self.cum[-1]) if self.cum.size else 0

    def take(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        """Order statistics x_(idx+1) (0-based ranks)."""
        return self.values[np.searchsorted(self.cum, idx, side="right")]

    def sparse_law(
        self, k: int, epsilon: float, bounds: tuple[float, float], granularity: float,
        shift_up: float | None = None,
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        """(piece index j, piece edges, log-mass) of every piece that can have mass.

        Between tied records the dense law's pieces have zero length, so only the piece
        after the last rank of each (shifted) group of ties, plus piece 0, can carry mass.
        A group straddling rank k is split: its first part is shifted down, the rest up.
        """
        a, b = bounds
        before = self.cum - self.counts  # ranks strictly before each group
        split = np.flatnonzero((before < k) & (self.cum > k))
        values = self.values
        last = self.cum.copy()
        down = self.cum <= k
        if split.size:
            g = int(split[0])
            values = np.insert(values, g, values[g])
            last = np.insert(last, g, k)
            down = np.insert(down, g, True)
            down[g + 1] = False
        up = granularity if shift_up is None else shift_up
        shifted = np.clip(np.where(down, values - granularity, values + up), a, b)
        edges = np.concatenate(([a], shifted, [b]))
        pieces = np.concatenate(([0], last)).astype(np.intp)
        with np.errstate(divide="ignore"):
            log_mass = np.log(np.diff(edges)) - epsilon * np.abs(pieces - k) / 2.0
        return pieces, edges, log_mass


class _SortedArray:
    """A sorted in-memory sample with the same interface as :class:`SortedCounts`."""

    def __init__(self, x_sorted: NDArray[np.float64]) -> None:
        self.x = x_sorted
        self.size = int(x_sorted.size)

    def take(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.x[idx]

    def sparse_law(
        self, k: int, epsilon: float, bounds: tuple[float, float], granularity: float,
        shift_up: float | None = None,
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        law = order_statistic_law(self.x, k, epsilon, bounds, granularity, shift_up)
        # unnormalised, on the same scale as the window's log-masses
        return np.arange(self.size + 1), law.edges, law.log_mass + law.log_norm


def _window_half(epsilon: float, span: float, band: float) -> int:
    """T of :func:`_sample_piece`: pieces k − T..k + T are read (public inputs only)."""
    log_ratio = math.log(span / band) + _WINDOW_MARGIN_DIGITS * math.log(10.0)
    return max(1, math.ceil(2.0 * log_ratio / epsilon))


def _rank_window(n: int, k: int, half: int) -> tuple[int, int]:
    """0-based ranks of the order statistics :func:`_sample_piece` reads for rank ``k``."""
    return max(0, k - half - 1), min(n - 1, k + half)


#: Below this many records the selection path just sorts (selection does not pay).
_SELECT_MIN_N = 1 << 15
#: Size of the strided pilot sample that places the value window of the selection.
_PILOT = 1 << 16


class SelectedSample:
    """Order statistics of an *unsorted* sample in windows of ranks, found by selection.

    ``take`` answers exactly what ``np.sort(x)[idx]`` would for every rank inside the
    windows, and ``sparse_law`` (the rare O(n) branch of :func:`_sample_piece`) sorts the
    whole sample on first use. The values are the order statistics themselves, not an
    approximation, so a mechanism run on this sample draws exactly what it draws on the
    sorted array, with the same random numbers (ties and clipped values included).

    Selection. For each window [r0, r1] a strided pilot sample (every (n // 2^16)-th
    record, sorted) proposes values v_lo ≤ v_hi expected to bracket ranks r0..r1 with a
    wide margin; one pass counts c0 = #{x < v_lo} and extracts C = {x : v_lo ≤ x ≤ v_hi},
    which is sorted. If c0 ≤ r0 and c0 + |C| > r1, the order statistic of rank r is
    C[r − c0] exactly (every record below v_lo has a smaller rank, every record of C a rank
    in c0..c0 + |C| − 1); otherwise the window is read from a full sort. Which branch runs
    changes only the time, never a value. Memory: two 2^16-byte masks and |C| values (the
    pass is chunked).

    Parameters
    ----------
    x : ndarray of float64, shape (n,)
        The sample in any order; it is read, never modified.
    windows : sequence of (int, int)
        Inclusive 0-based rank windows that will be read.
    clip : (float, float) or None, default=None
        If given, the sample is ``np.clip(x, *clip)`` while ``x`` itself is the caller's
        unclipped array (no clipped copy of n values is made). Clipping is monotone, so the
        order statistics of the clipped sample are the clipped order statistics of ``x``:
        the pilot, the extracted values and the full sort are clipped after they are read,
        and the value window maps back to ``x`` exactly: for lo ≤ v ≤ hi,
        clip(x) ≥ v ⇔ x ≥ v when v > lo (always true when v = lo), and clip(x) ≤ v ⇔
        x ≤ v when v < hi (always true when v = hi).
    """

    def __init__(self, x: NDArray[np.float64], windows: list[tuple[int, int]],
                 clip: tuple[float, float] | None = None) -> None:
        self.x = x
        self.clip = clip
        self.size = int(x.size)
        self._sorted: NDArray[np.float64] | None = None
        self._windows: list[tuple[int, NDArray[np.float64]]] = []
        if self.size < _SELECT_MIN_N:
            self._full()
            return
        for r0, r1 in _merge_windows(windows, self.size):
            self._windows.append((r0, self._select(r0, r1)))

    def _full(self) -> NDArray[np.float64]:
        if self._sorted is None:
            self._sorted = self._clipped(np.sort(self.x))
        return self._sorted

    def _clipped(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """``values`` (a fresh array read off ``x``) clipped in place when ``clip`` is set."""
        if self.clip is not None:
            np.clip(values, self.clip[0], self.clip[1], out=values)
        return values

    def _select(self, r0: int, r1: int) -> NDArray[np.float64]:
        n = self.size
        if 8 * (r1 - r0 + 1) > n:
            return self._full()[r0 : r1 + 1]
        stride = max(1, n // _PILOT)
        pilot = self._clipped(np.sort(self.x[::stride]))
        m = pilot.size
        # The sample rank of a record of rank r is about r·m/n, within a few sqrt(m)
        # (for data in random order); 4·sqrt(m) + 2 pilot points of margin on each side.
        margin = 4 * math.isqrt(m) + 2
        t_lo = (r0 * m) // n - margin
        t_hi = -(-(r1 + 1) * m // n) + margin
        v_lo = float(pilot[t_lo]) if t_lo >= 0 else -math.inf
        v_hi = float(pilot[t_hi]) if t_hi < m else math.inf
        raw_lo, raw_hi = v_lo, v_hi  # the same window on the unclipped x (class notes)
        if self.clip is not None:
            raw_lo = -math.inf if v_lo <= self.clip[0] else v_lo
            raw_hi = math.inf if v_hi >= self.clip[1] else v_hi
        c0, cand = _between(self.x, raw_lo, raw_hi)
        if not (c0 <= r0 and c0 + cand.size > r1):  # the pilot missed: exact fallback
            return self._full()[r0 : r1 + 1]
        self._clipped(cand).sort()
        return cand[r0 - c0 : r1 - c0 + 1]

    def take(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        """Order statistics x_(idx+1) (0-based ranks), exactly as from the sorted sample."""
        ranks = np.asarray(idx)
        if self._sorted is not None:
            return self._sorted[ranks]
        if ranks.size:
            lo, hi = int(ranks.min()), int(ranks.max())
            for r0, vals in self._windows:
                if r0 <= lo and hi < r0 + vals.size:
                    return vals[ranks - r0]
        return self._full()[ranks]

    def sparse_law(
        self, k: int, epsilon: float, bounds: tuple[float, float], granularity: float,
        shift_up: float | None = None,
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        return _SortedArray(self._full()).sparse_law(k, epsilon, bounds, granularity, shift_up)

    @classmethod
    def for_cell_ranks(
        cls, x: NDArray[np.float64], ranks: list[int], epsilon: float, grid: CellGrid,
        padded: bool = False, clip: tuple[float, float] | None = None,
    ) -> SelectedSample:
        """The sample :func:`sample_order_statistic_cell` needs for these target ranks.

        Parameters
        ----------
        x : ndarray of float64
            Clipped sample in any order (read only).
        ranks : list of int
            Target ranks k (0..n) of the draws that will be made.
        epsilon : float
            ε of each draw (the window width depends on it).
        grid : CellGrid
            The public output grid of the draws.
        padded : bool, default=False
            Whether the draws use the padded mechanism (its window differs).
        clip : (float, float) or None, default=None
            Read ``x`` as ``np.clip(x, *clip)`` without copying it (see the class).

        Notes
        -----
        The windows are the public T of :func:`_sample_piece` (from n, ε, M and Q only),
        so ``sample_order_statistic_cell(SelectedSample.for_cell_ranks(x, [k], ε, grid),
        k, ε, grid, rng)`` equals ``sample_order_statistic_cell(np.sort(x), k, ε, grid,
        rng)`` for every generator state (the quantile API uses it the same way).
        """
        n = int(x.size)
        first, stop = grid.output_range(padded)
        half = _window_half(epsilon, stop - first, float(grid.output_band(padded)))
        return cls(x, [_rank_window(n, int(k), half) for k in ranks], clip=clip)


#: Records per chunk of the selection pass (two boolean buffers of this size, in cache).
_SELECT_CHUNK = 1 << 16


def _between(x: NDArray[np.float64], v_lo: float, v_hi: float) -> tuple[int, NDArray[np.float64]]:
    """(#{x < v_lo}, the values v_lo ≤ x ≤ v_hi in data order), one chunked pass."""
    below = 0
    parts: list[NDArray[np.float64]] = []
    ge = np.empty(min(_SELECT_CHUNK, x.size), dtype=np.bool_)
    le = np.empty_like(ge)
    for start in range(0, x.size, _SELECT_CHUNK):
        chunk = x[start : start + _SELECT_CHUNK]
        g, h = ge[: chunk.size], le[: chunk.size]
        np.greater_equal(chunk, v_lo, out=g)
        below += chunk.size - int(np.count_nonzero(g))
        np.less_equal(chunk, v_hi, out=h)
        np.logical_and(g, h, out=g)
        parts.append(chunk[g])
    return below, np.concatenate(parts) if parts else np.empty(0)


def _merge_windows(windows: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """Sorted, clipped windows, merged when they overlap or are close (one selection)."""
    out: list[tuple[int, int]] = []
    for r0, r1 in sorted((max(0, a), min(n - 1, b)) for a, b in windows):
        if out and r0 <= out[-1][1] + max(64, n // 1024):
            out[-1] = (out[-1][0], max(out[-1][1], r1))
        else:
            out.append((r0, r1))
    return out


@functools.lru_cache(maxsize=256)
def _span(a: float, b: float) -> Fraction:
    """b − a exactly (public bounds)."""
    return Fraction(b) - Fraction(a)


def _sample_piece(
    sample: SortedCounts | _SortedArray | _CellSample,
    k: int,
    epsilon: float,
    bounds: tuple[float, float],
    shift_down: float,
    shift_up: float,
    band: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Edges (lo, hi) of one exactly drawn piece of the rank-``k`` law (see below).

    Piece j has mass len_j·e^{−c|j−k|}, c = ε/2 as an exact rational
    (:func:`~dpfair.mechanisms.exact_choice.exact_rate`) and len_j the exact length
    between the piece's binary64 edges (an integer number of cells for the cell
    mechanism). The pieces with |j − k| > T have total mass at most
    |R|·e^{−c(T+1)}; with T chosen so that this is < 1e-12 of the score-0 band's mass
    (≥ ``band``), the draw touches only the 2T + 1 window pieces, plus one virtual piece
    of mass U_out = |R|·e^{−c(T+1)} ≥ W_out (the true outside mass). Only if the virtual
    piece is chosen (probability < 1e-12) are all pieces computed (O(n)): then an outside
    piece j is kept with probability len_j e^{−c|j−k|}/U_out (one exact choice with total
    U_out), and otherwise the draw is replaced by an exact draw from the full law — what
    a restart of the rejection loop would return in law
    (:func:`~dpfair.mechanisms.exact_choice.choose_windowed`). Every decision is exact
    (:func:`~dpfair.mechanisms.exact_choice.choose_pieces`, no floating-point slack),
    so the drawn piece has exactly the law len_j e^{−c|j−k|}/Σ. T depends only on public
    quantities (n, ε, |R|, band), so the work done depends on the data only through that
    rare branch and the exact sampler's slow path, whose probabilities are set by the noise.
    """
    a, b = bounds
    n = sample.size
    rate = exact_rate(epsilon)
    half = _window_half(epsilon, b - a, band)
    j_lo, j_hi = max(0, k - half), min(n, k + half)  # window of pieces j_lo..j_hi
    # Breakpoints y_j for j = j_lo..j_hi+1 (y_0 = a, y_{n+1} = b).
    j = np.arange(j_lo, j_hi + 2)
    vals = sample.take(np.clip(j - 1, 0, n - 1))
    y = np.where(j <= k, vals - shift_down, vals + shift_up)
    y = np.where(j == 0, a, np.where(j == n + 1, b, y))
    np.clip(y, a, b, out=y)
    units = np.abs(np.arange(j_lo, j_hi + 1) - k)
    outside = None
    if j_lo > 0 or j_hi < n:  # Σ exact lengths = b − a: W_out ≤ (b − a)·e^{−c(T+1)}
        outside = (_span(a, b), half + 1)
    cache: list[NDArray[np.float64]] = []

    def full() -> tuple[NDArray[np.bool_], PieceMasses, NDArray[np.int64]]:
        index, edges, _ = sample.sparse_law(k, epsilon, bounds, shift_down, shift_up)
        cache.append(edges)
        return (index >= j_lo) & (index <= j_hi), PieceMasses.lengths(edges), np.abs(index - k)

    pos, in_window = choose_windowed(PieceMasses.lengths(y), units, rate, outside, full, rng)
    p = int(pos[0])
    e = y if in_window[0] else cache[0]
    return float(e[p]), float(e[p + 1])


def sample_order_statistic(
    x_sorted: NDArray[np.float64] | SortedCounts,
    k: int,
    epsilon: float,
    bounds: tuple[float, float],
    granularity: float,
    rng: np.random.Generator,
) -> float:
    """One exact draw from :func:`order_statistic_law` in O(T) instead of O(n).

    The real-arithmetic mechanism (a uniform point of a data-dependent piece); the
    released intervals use :func:`sample_order_statistic_cell` instead, whose output is a
    cell of a public grid (see :class:`CellGrid`). ``x_sorted`` may also be a
    :class:`SortedCounts` (histogram path).
    """
    sample = x_sorted if isinstance(x_sorted, SortedCounts) else _SortedArray(x_sorted)
    a, b = bounds
    band = min(granularity, b - a)
    lo, hi = _sample_piece(sample, k, epsilon, bounds, granularity, granularity, band, rng)
    return float(min(lo + rng.random() * (hi - lo), hi))


#: Cells per granularity step θ of the public output grid (a power of two, so θ/Q is
#: exact), reduced when the grid would be too fine for the bounds' floating-point scale.
_CELLS_PER_THETA = 64
#: At most this many cells over R: cell indices stay exact in float64 and the cell of a
#: record is computed with an error below 2^-11 cells (see :class:`CellGrid`).
_MAX_CELLS = 2**40


@dataclass(frozen=True)
class CellGrid:
    r"""The public output grid of ExpMech: M cells of width θ_g = θ/Q on R = [a, b].

    Cell m is [a + mθ_g, a + (m+1)θ_g), m = 0..M−1, with M = ⌈(b − a)/θ_g⌉. Everything
    here is a function of the public (a, b, θ) only.

    Floating-point model (``docs/floating_point.md``). A record x ∈ R enters the
    mechanism only through its cell index κ(x) = clip(⌊fl(fl(x − a)/θ_g)⌋, 0, M − 1), a
    deterministic, non-decreasing function of x. Both roundings are relative errors ≤ 2^-53
    of numbers ≤ M ≤ 2^40 (in cell units), so κ(x) is the true cell of x or a neighbour of
    it:

    .. math:: a + (κ(x) − 1)θ_g ≤ x ≤ a + (κ(x) + 2)θ_g. \qquad (P)

    The mechanism's choice (a cell m) depends on the data only through the integers κ_i,
    and the released ends a + jθ_g (j an integer computed from m) are computed from public
    quantities only, so no low-order bit of any record can reach the output. ``Q`` is
    reduced (by halving) until θ_g ≥ 2^-40·max(|a|, |b|, b − a) and M ≤ 2^40, which keeps
    the rounding of a + jθ_g (≤ 2^-51 max(|a|, |b|)) far below the one-cell margin of (P);
    if even Q = 1 does not fit (R wider than 2^40 θ), the cells are coarsened to θ_g = 2^p θ
    with one-cell shifts, the smallest such grid that fits (reported in the diagnostics).
    The coverage argument holds for every integer Q ≥ 1 and every θ_g.
    """

    low: float
    cell: float
    n_cells: int
    per_theta: int

    @classmethod
    def for_bounds(cls, bounds: tuple[float, float], granularity: float) -> CellGrid:
        """The grid for public bounds R and granularity θ (cached per public input)."""
        return _cell_grid(float(bounds[0]), float(bounds[1]), float(granularity))

    def index(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """κ(x) for values in R, as exact integers stored in float64."""
        t = np.floor((np.asarray(x, dtype=np.float64) - self.low) / self.cell)
        return np.clip(t, 0.0, float(self.n_cells - 1))

    def edge(self, j: int) -> float:
        """a + j·θ_g: a public number (j is an integer computed from the chosen cell)."""
        return float(self.low + j * self.cell)

    @property
    def band_cells(self) -> int:
        """Minimum number of cells of the score-0 band: Q + 1 (see :func:`expmech_interval`)."""
        return min(self.per_theta + 1, self.n_cells)

    @property
    def tail_constant(self) -> float:
        """C = (M − band)/band: the tail bound P(s ≤ −t) ≤ C e^{−εt/2} of the cell mechanism."""
        band = self.band_cells
        return max(self.n_cells - band, 0) / band

    @property
    def padded_band_cells(self) -> int:
        """Minimum score-0 band of the *padded* cell mechanism: 2Q + 1 cells.

        With Q output cells added below cell 0 and above cell M − 1 (records stay in
        0..M − 1), the band [κ_(k) − Q, κ_(k+1) + Q] is never cut by an end of the range.
        """
        return 2 * self.per_theta + 1

    @property
    def padded_tail_constant(self) -> float:
        """C = (M + 2Q − (2Q + 1))/(2Q + 1) = (M − 1)/(2Q + 1) of the padded mechanism.

        About half of :attr:`tail_constant` for the same grid (the band's minimum doubles
        while the range grows by 2Q cells), see :func:`sample_order_statistic_cell`.
        """
        return max(self.n_cells - 1, 0) / self.padded_band_cells

    def output_range(self, padded: bool = False) -> tuple[float, float]:
        """Cell-index range (first, stop) of the mechanism's outputs: (0, M) or (−Q, M + Q)."""
        pad = float(self.per_theta) if padded else 0.0
        return -pad, float(self.n_cells) + pad

    def output_band(self, padded: bool = False) -> int:
        """Minimum score-0 band (cells) of the plain or padded mechanism."""
        return self.padded_band_cells if padded else self.band_cells


@functools.lru_cache(maxsize=64)
def _cell_grid(a: float, b: float, granularity: float) -> CellGrid:
    # Defence in depth: a zero-width, reversed or non-finite range, or a zero, negative or
    # non-finite θ, has no grid (and θ = 0 would make the doubling below loop forever,
    # 0·2 = 0). No release asks for one (the public checks of the callers exclude it).
    if not (math.isfinite(a) and math.isfinite(b) and a < b and math.isfinite(b - a)):
        raise InvalidParameterError(
            f"bounds={(a, b)!r}: the ExpMech output grid needs finite bounds with lo < hi "
            "(an internal range that collapsed; bounds too narrow for their magnitude?)."
        )
    if not (math.isfinite(granularity) and granularity > 0.0):
        raise InvalidParameterError(
            f"granularity={granularity!r}: the ExpMech output grid needs a finite, positive "
            f"granularity for the range {(a, b)}."
        )
    scale = max(abs(a), abs(b), b - a)

    def fits(cell: float) -> bool:
        return cell >= scale * 2.0**-40 and math.ceil((b - a) / cell) <= _MAX_CELLS

    q = _CELLS_PER_THETA
    while q > 1 and not fits(granularity / q):
        q //= 2
    cell = granularity / q
    # R is too wide for θ: coarser cells, one-cell shifts. cell > 0 here, so it reaches
    # the smallest fitting power-of-two multiple within 2100 doublings (binary64 spans
    # 2^-1074..2^1024); the bound makes termination explicit.
    for _ in range(2200):
        if fits(cell):
            break
        cell *= 2.0
    else:
        cell = math.inf
    if not math.isfinite(cell) or cell <= 0.0:
        raise InvalidParameterError(
            f"granularity={granularity!r}: no public output grid fits the range {(a, b)}; "
            "use finite bounds and a positive granularity."
        )
    return CellGrid(low=a, cell=cell, n_cells=max(math.ceil((b - a) / cell), 1), per_theta=q)


class _CellSample:
    """A sorted sample seen through κ: same interface as :class:`SortedCounts`."""

    def __init__(self, sample: SortedCounts | _SortedArray | SelectedSample,
                 grid: CellGrid) -> None:
        self.sample = sample
        self.grid = grid
        self.size = sample.size

    def take(self, idx: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.grid.index(self.sample.take(idx))

    def compressed(self) -> SortedCounts:
        """(distinct cells, counts) of the whole sample: O(n), only in the rare branch."""
        if isinstance(self.sample, SortedCounts):
            cells = self.grid.index(self.sample.values)
            counts = self.sample.counts
        elif isinstance(self.sample, SelectedSample):
            cells = self.grid.index(self.sample._full())
            counts = np.ones(cells.size, dtype=np.int64)
        else:
            cells = self.grid.index(self.sample.x)
            counts = np.ones(cells.size, dtype=np.int64)
        uniq, inverse = np.unique(cells, return_inverse=True)
        merged = np.bincount(inverse.ravel(), weights=counts, minlength=uniq.size)
        return SortedCounts(uniq, np.rint(merged).astype(np.int64))

    def sparse_law(
        self, k: int, epsilon: float, bounds: tuple[float, float], granularity: float,
        shift_up: float | None = None,
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        return self.compressed().sparse_law(k, epsilon, bounds, granularity, shift_up)


def _as_sample(
    x: NDArray[np.float64] | SortedCounts | SelectedSample,
) -> SortedCounts | _SortedArray | SelectedSample:
    return x if isinstance(x, (SortedCounts, SelectedSample)) else _SortedArray(x)


def sample_order_statistic_cell(
    x_sorted: NDArray[np.float64] | SortedCounts | SelectedSample,
    k: int,
    epsilon: float,
    grid: CellGrid,
    rng: np.random.Generator,
    *,
    padded: bool = False,
) -> int:
    r"""One draw of the cell mechanism for rank ``k``: a cell index m ∈ {0, …, M − 1}.

    With κ_(1) ≤ … ≤ κ_(n) the sorted cell indices of the (clipped) records and
    Q = ``grid.per_theta``, the score of cell m is

    .. math:: s_k(m) = -\max\{0,\; k - c^+(m),\; c^-(m) - k\},\quad
              c^+(m) = \#\{i: κ_i ≤ m + Q\},\; c^-(m) = \#\{i: κ_i < m - Q\},

    sensitivity 1 (each count moves by ≤ 1 when one record is replaced), and
    P(m) ∝ exp(ε s_k(m)/2). Equivalently, the pieces [y_j, y_{j+1}) of integer cells with
    y_j = κ_(j) − Q (j ≤ k), κ_(j) + Q + 1 (j > k), clipped to [0, M], carry score −|j − k|:
    a piece is drawn by :func:`_sample_piece` with the exact sampler (masses len_j cells,
    offsets |j − k|, rate ε/2 as an exact rational: the executed law *is* this law, so the
    pure ε and ε²/8-zCDP statements hold as executed), then a cell uniformly inside it with
    an exact integer draw. Everything depends on the data only through the integers κ_i.

    Running time: O(T) with T from public (n, ε, M/(Q + 1)) only, plus the O(n) branch
    that runs with probability < 1e-12 as decided by the noise (:func:`_sample_piece`).

    Padded (``padded=True``, the localised quantile intervals). The output cells are
    m ∈ {−Q, …, M + Q − 1}: Q cells are added on each side of the grid while the records'
    cells κ_i stay in 0..M − 1 (y_0 = −Q, y_{n+1} = M + Q), with the same score. The
    score-0 band [κ_(k) − Q, κ_(k+1) + Q] then always holds ≥ 2Q + 1 cells (unpadded it
    holds only Q + 1 when κ_(k) is an end cell, e.g. data clipped to a localised range),
    so the tail constant is (M − 1)/(2Q + 1) (:attr:`CellGrid.padded_tail_constant`),
    about half of the unpadded (M − Q − 1)/(Q + 1). Sensitivity, the exact sampler and
    the coverage argument (which holds for every integer cell m) are unchanged; the cost
    is that an end can now land up to Q cells outside R, where it is clipped to R.
    """
    cells = _CellSample(_as_sample(x_sorted), grid)
    q = float(grid.per_theta)
    lo, hi = _sample_piece(cells, k, epsilon, grid.output_range(padded), q, q + 1.0,
                           float(grid.output_band(padded)), rng)
    first, stop = int(lo), int(hi)
    return first + int(rng.integers(stop - first)) if stop > first + 1 else first


def cell_order_statistic_law(
    x_sorted: NDArray[np.float64], k: int, epsilon: float, grid: CellGrid, *,
    padded: bool = False,
) -> NDArray[np.float64]:
    """Exact probabilities of the cells under :func:`sample_order_statistic_cell` (O(M)).

    For tests and small grids: the law of the piece, spread uniformly over its cells.
    Entry i is cell i (``padded=False``: M cells) or cell i − Q (``padded=True``: the
    M + 2Q cells −Q..M + Q − 1).
    """
    cells = grid.index(x_sorted)
    q = float(grid.per_theta)
    law = order_statistic_law(cells, k, epsilon, grid.output_range(padded), q, q + 1.0)
    probs = law.piece_probabilities
    edges = np.rint(law.edges).astype(np.int64)  # integers (also the padded −Q)
    lengths = np.diff(edges)
    per_cell = np.divide(probs, lengths, out=np.zeros_like(probs), where=lengths > 0)
    return np.repeat(per_cell, lengths)


@functools.lru_cache(maxsize=256)
def expmech_target_ranks(
    n: int, epsilon: float, alpha: float, range_width: float, granularity: float
) -> tuple[int, int, float]:
    """Target ranks (kL, kU) and the tail constant C of the real-arithmetic ExpMech.

    The released interval runs the cell mechanism instead (:func:`expmech_interval`),
    whose ranks use C = :attr:`CellGrid.tail_constant` (slightly smaller, so its ranks are
    the same or one closer to the median).

    Raises
    ------
    InsufficientDataError
        If no rank gives lower-tail failure ≤ α/2.
    """
    band = min(granularity, range_width)
    ratio = max(range_width - band, 0.0) / band

    k_low = expmech_lower_target(n, epsilon, ratio, alpha / 2.0)
    if k_low < 0:
        raise InsufficientDataError(
            f"n={n} is too small for a valid ExpMech interval at alpha={alpha:g} with "
            f"epsilon={epsilon:.4g} per draw and range/granularity ratio {ratio:.4g}: even the "
            "lowest rank misses the median too often. Increase n, rho or alpha, or use a "
            "narrower public range."
        )
    return k_low, n - k_low, ratio


@functools.lru_cache(maxsize=256)
def _cell_target_ranks(n: int, epsilon: float, alpha: float, grid: CellGrid) -> tuple[int, int]:
    k_low = expmech_lower_target(n, epsilon, grid.tail_constant, alpha / 2.0)
    if k_low < 0:
        raise InsufficientDataError(
            f"n={n} is too small for a valid ExpMech interval at alpha={alpha:g} with "
            f"epsilon={epsilon:.4g} per draw and range/granularity ratio "
            f"{grid.tail_constant:.4g}: even the lowest rank misses the median too often. "
            "Increase n, rho or alpha, or use a narrower public range."
        )
    return k_low, n - k_low


def expmech_interval(
    x_sorted: NDArray[np.float64] | SortedCounts,
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    granularity: float,
    rng: np.random.Generator,
    *,
    presorted: bool = True,
    clip: bool = False,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """Run ExpMech on clipped, sorted data (an array or :class:`SortedCounts`).

    Returns (low, high, spent, diagnostics).

    With ``presorted=False`` the array is the clipped sample in *any* order (read, never
    modified): only the order statistics in the two public rank windows the draws read are
    found, by selection (:class:`SelectedSample`), instead of sorting all n records — about
    a third of a sort's time at n = 10^7. The release is identical (same values, same random
    draws) to ``presorted=True`` on the sorted array. With ``clip=True`` as well, the array
    may hold values outside ``bounds`` (the caller's own, unclipped array): the mechanism
    reads it as ``np.clip(x, *bounds)`` — the records it reads are clipped as they are
    read — and releases exactly what it releases on the clipped copy, with no copy made.

    Notes
    -----
    As executed, each draw is the cell mechanism :func:`sample_order_statistic_cell` on the
    public grid :meth:`CellGrid.for_bounds` (θ_g = θ/Q), and the interval is
    [a + (m_L − Q − 1)θ_g, a + (m_U + Q + 2)θ_g] ∩ R for the drawn cells m_L, m_U.
    Coverage, following the module docstring with B = #{x_i < med}: if the lower end
    exceeds med, every x_i < med has, by (P) of :class:`CellGrid`, κ_i − 1 < m_L − Q − 1,
    so c⁻(m_L) ≥ B and s(m_L) ≤ −(B − kL); if the upper end is below med, every x_j > med
    has κ_j + 2 > m_U + Q + 2, so c⁺(m_U) ≤ B and s(m_U) ≤ −(kU − B). The score-0 band
    [κ_(k) − Q, κ_(k+1) + Q] ∩ {0..M−1} holds at least Q + 1 of the M cells, so the tail
    bound holds with C = (M − Q − 1)/(Q + 1) (:attr:`CellGrid.tail_constant`), and the
    target ranks are computed with it. Against the real-arithmetic mechanism the interval
    is wider by about 3θ_g = 3θ/Q on average.
    """
    n = x_sorted.size
    a, b = bounds
    grid = CellGrid.for_bounds(bounds, granularity)
    mech = ExponentialMechanism.for_zcdp(rho / 2.0)  # ε²/8 = ρ/2 per draw: ε = 2·sqrt(ρ)
    k_low, k_high = _cell_target_ranks(n, mech.epsilon, alpha, grid)
    sample: NDArray[np.float64] | SortedCounts | SelectedSample = x_sorted
    if clip and (presorted or isinstance(x_sorted, SortedCounts)):
        raise ValueError("clip=True reads an unsorted array: it needs presorted=False")
    if not presorted and not isinstance(x_sorted, SortedCounts):
        sample = SelectedSample.for_cell_ranks(x_sorted, [k_low, k_high], mech.epsilon, grid,
                                               clip=bounds if clip else None)
    acct = Accountant(Budget.zcdp(rho))
    acct.charge(mech.privacy_zcdp, label="expmech/lower")
    cell_low = sample_order_statistic_cell(sample, k_low, mech.epsilon, grid, rng)
    acct.charge(mech.privacy_zcdp, label="expmech/upper")
    cell_high = sample_order_statistic_cell(sample, k_high, mech.epsilon, grid, rng)
    q = grid.per_theta
    low = max(a, grid.edge(cell_low - q - 1))
    high = min(b, grid.edge(cell_high + q + 2))
    diagnostics: dict[str, Any] = {
        "target_ranks": (k_low, k_high),
        "epsilon_per_draw": mech.epsilon,
        "zcdp_conversion": "bounded range: eps^2/8 per draw",
        "tail_constant": grid.tail_constant,
        "output_grid": {"cell": grid.cell, "cells": grid.n_cells, "cells_per_theta": q},
        "ledger": [(e.label, e.budget.rho) for e in acct.records],
    }
    return low, high, acct.spent, diagnostics

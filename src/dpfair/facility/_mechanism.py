r"""DPExpMed_α: the widened exponential mechanism for the median (paper 000, §7.1).

Mechanism
---------
Public inputs: the domain V = [lo, hi] (m = hi − lo), ε > 0, the widening α ≥ 0, and n
(public under replace-one neighbours, ALGORITHMS.md §0). The output L ∈ V has density

.. math:: f_D(ℓ) ∝ \exp\bigl(-\tfrac{ε}{2}\, p_α(D, ℓ)\bigr),
          \qquad p_α(D, ℓ) = \min_{|a - ℓ| ≤ αm} q(D, a)

(Defs. 7.3–7.5; q and p_α in :mod:`dpfair.facility._metrics`). The default widening is
α* = 1/(nε) (Cor. 7.10), a function of public quantities only.

**n must be public for the default widening.** Under add/remove neighbours n is private,
and α* = 1/(nε) moves the loss-0 band with it: with every agent at 0.5, ε = 1, the exact
laws for n = 1000 and n = 1001 have log-density ratio 250.5 (= 250.5ε), so the default is
then *not* private. With a fixed ``widening`` (chosen without looking at the data) the
mechanism is ε-DP under add/remove neighbours too: adding an agent changes k, the cap,
c(a) and c⁻(a) by 0 or +1 each, so the argument below still gives |Δq| ≤ 1
(``tests/facility/test_add_remove.py`` checks both facts on exact laws).

Privacy (Lemma 7.6, re-derived)
-------------------------------
With c(a) = #{i : x_i ≤ a} and c⁻(a) = #{i : x_i < a},
q(D, a) = min{cap, max(0, k − c(a), c⁻(a) + 1 − k)} where k and cap depend on n only.
Replacing one agent changes c(a) and c⁻(a) by at most 1 each; max and min with constants
or with each other are 1-Lipschitz in the sup norm, so |q(D, a) − q(D', a)| ≤ 1 for every
a. Taking the minimum over the same set {a : |a − ℓ| ≤ αm} preserves this:
|p_α(D, ℓ) − p_α(D', ℓ)| ≤ 1 for every ℓ. The exponential mechanism with a sensitivity-1
loss and density ∝ exp(−ε p_α / 2) has unnormalised densities within a factor e^{ε/2}
pointwise and normalisers within e^{ε/2}, so f_D(ℓ)/f_{D'}(ℓ) ≤ e^ε for every ℓ:
**pure ε-DP** under replace-one neighbours, for every α ≥ 0 (and for both medians). The
support is all of V whatever the data, so no output is impossible under one data set and
possible under its neighbour. The tests check the density ratio exactly at every
breakpoint of both densities (``tests/facility/test_privacy.py``).

Exact law and sampling
----------------------
After sorting, p_α(D, ·) is constant on the n + 2 pieces cut by the edges
lo, x_1 − αm, …, x_k − αm, x_k + αm, …, x_n + αm, hi (clipped to V): piece j carries the
loss min(cap, |j − k|). :meth:`DPExpMed.distribution` builds this law in O(n) after the
sort. :meth:`DPExpMed.sample` does not sort: one selection (``numpy.partition``) puts
T = x_(k) in place, two more select the W order statistics on each side, which are then
sorted (W ≈ (2/ε)(ln(1/α) + 12 ln 10)). Pieces outside that window have loss ≥ W + 1 and
total length ≤ m, so their mass is bounded by m·e^{−ε(W+1)/2} ≤ 1e-12 × the mass of the
loss-0 band (length ≥ min(α, 1)·m); :func:`~dpfair.mechanisms.exact_choice.choose_windowed`
then draws exactly, falling back to the full sorted law only with probability below 1e-12.
The piece choice is exact as executed: the masses are the exact lengths between the
computed binary64 edges times e^{−c·loss} with the integer loss and c = ε/2 an exact
rational (:mod:`dpfair.mechanisms.exact_choice`, no floating-point slack).
W depends on the public (ε, α, n) only, so the work done does not depend on the data
(beyond that 1e-12 branch). With α = 0 there is no such bound: a tie block around the
median makes every piece of any window empty, so :meth:`DPExpMed.sample` then sorts and
draws from the full law (O(n log n), the same work whatever the data).

Privacy as executed (issue 11; ``docs/proofs/facility_dpexpmed.md`` §5a)
------------------------------------------------------------------------
The edges are g⁻(x_i) = clip(fl(x_i − b)) and g⁺(x_i) = clip(fl(x_i + b)), b = fl(αm),
computed per record; g^± are non-decreasing and g⁻ ≤ g⁺. On the piece holding v the
executed loss is exactly L̂(v) = min{cap, max(0, k − #{i : g⁻(x_i) ≤ v},
#{i : g⁺(x_i) ≤ v} + 1 − k)}: two counts of per-record events, each moved by ≤ 1 by a
neighbour, so L̂ has sensitivity 1 — no property of the rounded edges beyond monotonicity
and g⁻ ≤ g⁺ is needed (not that they are translates by 2αm). The piece is chosen with
probability ∝ exact length × e^{−r·loss}, r = ε(1 − 2^-50)/2 exactly; then the released
public cell is chosen *exactly* with probability (overlap with the piece)/(piece length)
(:func:`_choose_cells`), and the released number is a uniform point of that cell computed
from the cell index and public numbers only. So the cell law is exactly
∫_cell e^{−r L̂}/Ẑ — the law :meth:`DPExpMed.distribution` returns (its rate is ε/2) —
and every cell-probability ratio between neighbours is ≤ e^{2r} < e^ε: pure ε-DP (and
ε-bounded range) as executed, with no argued step.
"""

from __future__ import annotations

import abc
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import (
    check_finite_1d,
    check_interval_bounds,
    check_not_masked,
    check_positive,
)
from dpfair.facility._laws import FacilityDistribution
from dpfair.facility._metrics import MedianChoice, Profile, check_median, loss_cap, median_index
from dpfair.mechanisms import (
    PieceMasses,
    PiecewiseConstantLaw,
    choose_pieces,
    choose_windowed,
    exact_rate,
)
from dpfair.privacy import Accountant, Budget, exponential_mechanism_zcdp

__all__ = ["DPExpMed", "check_locations"]

_MIN_EPSILON = 1e-100  # smallest ε accepted (see DPExpMed.__post_init__)

#: The window is chosen so the outside mass is at most this fraction of the window's.
_WINDOW_LOG_RATIO = 12.0 * math.log(10.0)


def check_locations(
    x: ArrayLike, domain: tuple[float, float], name: str = "x"
) -> NDArray[np.float64]:
    """Validate agent locations against the public domain; returns a float64 copy.

    Raises
    ------
    InvalidDataError
        Empty, not 1-D, NaN/inf, or any location outside ``domain``. Locations are the
        agents' own data and the domain is public: dpfair never clips them silently.
    """
    lo, hi = domain
    check_not_masked(name, x)
    try:
        arr = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        arr = check_finite_1d(name, x)  # raises the standard message
    if arr.ndim != 1 or arr.size == 0:
        arr = check_finite_1d(name, arr)
    mn, mx = float(arr.min()), float(arr.max())
    if not (lo <= mn and mx <= hi):  # also catches NaN (comparisons are False)
        check_finite_1d(name, arr)  # NaN/inf message first
        outside = np.flatnonzero((arr < lo) | (arr > hi))
        i = int(outside[0])
        raise InvalidDataError(
            f"{name} has {outside.size} location(s) outside domain=({lo:g}, {hi:g}), first at "
            f"index {i} (value {float(arr[i])!r}): agent locations are private data and the domain "
            "is public, so dpfair never clips them silently. Use a domain that contains "
            "every location, or remove those records."
        )
    return arr


def sorted_profile(
    x: ArrayLike, domain: tuple[float, float], median: MedianChoice
) -> Profile:
    """:func:`check_locations`, sorted: the :class:`Profile` the exact laws are built from."""
    xs = check_locations(x, domain)
    xs.sort()
    return Profile.from_sorted(xs, median)


def _law_from_sorted(
    xs: NDArray[np.float64],
    k: int,
    band: float,
    epsilon: float,
    lo: float,
    hi: float,
) -> PiecewiseConstantLaw:
    """Exact law of DPExpMed on sorted data (O(n)); band = αm."""
    n = xs.size
    edges = np.empty(n + 3, dtype=np.float64)
    edges[0] = lo
    edges[1 : k + 1] = xs[:k] - band
    edges[k + 1 : n + 2] = xs[k - 1 :] + band
    edges[n + 2] = hi
    np.clip(edges, lo, hi, out=edges)
    levels = np.arange(n + 2, dtype=np.float64)  # piece index j -> -ε·min(cap, |j − k|)/2
    levels -= k
    np.abs(levels, out=levels)
    np.minimum(levels, loss_cap(n, k), out=levels)
    levels *= -0.5 * epsilon
    return PiecewiseConstantLaw(edges, levels)


#: The public output grid has cells of width 2^-44 of the domain's scale (256 ulps).
_CELL_BITS = 44
_U53 = 2.0**-53
#: Relative margin of the fast cell decision: |p̂ − p| ≤ 3.01u·p for p̂ = fl(fl(L)/fl(T)),
#: plus u for the product with (1 ± margin).
_CELL_TOL = 8.0 * _U53
_WORD_MAX = 2**64 - 1


@dataclass(frozen=True)
class _OutputGrid:
    r"""Public cells: multiples of θ_g = 2^(⌊log2 s⌋ − 44), s = max(|lo|, |hi|, hi − lo).

    The cell edges are E_0 = lo, E_c = (J_0 + c)·θ_g for 0 < c < N, E_N = hi, with
    J_0 = ⌊lo/θ_g⌋ and N = ⌈hi/θ_g⌉ − J_0. Every E_c is an exact binary64 number
    (|J_0 + c| < 2^47, θ_g a power of two), they are strictly increasing, and every cell
    except the first and the last has length exactly θ_g. All of it depends on (lo, hi)
    only.

    Floating-point model (``docs/floating_point.md``). :meth:`release` chooses the cell
    of a uniform point of a piece [a, b] *exactly* (probabilities = exact overlap lengths
    / (b − a), :func:`_choose_cells`) and returns E_c + u·(E_{c+1} − E_c) for a uniform u:
    the output is computed from the integer c and public numbers only, and its cell law
    is exactly the mechanism's law averaged over each cell (:func:`_cell_average`).
    """

    low: float
    high: float
    cell: float
    first: int
    n_cells: int

    @classmethod
    def for_domain(cls, lo: float, hi: float) -> _OutputGrid:
        return _grid_for_domain(float(lo), float(hi))

    def edge(self, c: ArrayLike) -> NDArray[np.float64]:
        """E_c (exact; E_c = lo for c ≤ 0 and hi for c ≥ N)."""
        ci = np.asarray(c, dtype=np.float64)
        return np.clip((ci + self.first) * self.cell, self.low, self.high)

    def index(self, t: ArrayLike) -> NDArray[np.int64]:
        """The cell c with E_c ≤ t < E_{c+1} (clipped to 0 … N − 1), exactly.

        t/θ_g is a scaling by a power of two, exact unless it is subnormal; then its floor
        is still right (0 or −1) unless it rounded to −0, which the correction catches.
        """
        tt = np.asarray(t, dtype=np.float64)
        q = tt / self.cell
        c = np.floor(q) - ((q == 0) & (tt < 0)) - self.first
        return np.clip(c, 0, self.n_cells - 1).astype(np.int64)

    def release(
        self, a: NDArray[np.float64], b: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """A uniform point of the public cell of a uniform point of each piece [a, b].

        The point is fl(E_c + u·(E_{c+1} − E_c)) (u uniform on [0, 1), 53 bits), lowered
        to the largest double below E_{c+1} when it rounds up to that edge, so it lies in
        [E_c, E_{c+1}) and :meth:`index` of it is c: a function of c and u only.
        """
        if a.size == 1:  # the same decisions on Python floats (public branch: size only)
            e0, e1 = self._edges1(_choose_cell1(self, float(a[0]), float(b[0]), rng))
            return np.array([min(e0 + rng.random() * (e1 - e0), math.nextafter(e1, -math.inf))])
        c = _choose_cells(self, a, b, rng)
        lo_e, hi_e = self.edge(c), self.edge(c + 1)
        top = np.nextafter(hi_e, -np.inf)  # keep the point in [E_c, E_{c+1}): index(point) = c
        return np.minimum(lo_e + rng.random(c.size) * (hi_e - lo_e), top)

    def _edges1(self, c: int) -> tuple[float, float]:
        j = self.first + c
        lo_e = self.low if c <= 0 else min(j * self.cell, self.high)
        hi_e = self.high if c + 1 >= self.n_cells else max((j + 1) * self.cell, self.low)
        return lo_e, hi_e


@functools.lru_cache(maxsize=64)
def _grid_for_domain(lo: float, hi: float) -> _OutputGrid:
    scale = max(abs(lo), abs(hi), hi - lo)
    # a normal power of two (so 1/θ_g and every E_c are exact), also on tiny domains
    cell = 2.0 ** max(math.floor(math.log2(scale)) - _CELL_BITS, -1022)
    first = math.floor(Fraction(lo) / Fraction(cell))  # exact
    last = math.ceil(Fraction(hi) / Fraction(cell))
    return _OutputGrid(lo, hi, cell, first, max(last - first, 1))


def _choose_cells(
    grid: _OutputGrid, a: NDArray[np.float64], b: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.int64]:
    r"""The public cell of V uniform on [a_i, b_i] (a_i < b_i binary64 in V), exactly.

    The piece meets the cell c_a ∋ a (*first*, overlap L_1 = min(b, E_{c_a+1}) − a), the
    cells c_a + 1 … c_b − 1 (the *block*, each exactly θ_g long) and the cell c_b with
    E_{c_b} < b ≤ E_{c_b+1} (*last*, overlap L_3 = b − E_{c_b}); T = b − a. With U uniform
    on [0, 1) the cell is first if U·T < L_1, last if U·T ≥ T − L_3, otherwise a block
    cell, then uniform on the block (equal lengths θ_g): P(c) = |[a, b] ∩ cell c| / T,
    exactly. In absolute grid units c_a + J_0 = ⌊a/θ_g⌋ and c_b + J_0 = ⌈b/θ_g⌉ − 1
    (exact scalings; a quotient that underflows to 0 is corrected by its sign).

    U is revealed from 64-bit words: the first word's top 53 bits B put U in
    [B·2^-53, (B + 1)·2^-53); the fast path compares that interval with p̂_1 = fl(L_1/T)
    and q̂_3 = fl(L_3/T), each within 3.01u relatively of the exact ratio if normal (two
    correctly rounded differences and a quotient; a subnormal quotient is below every
    non-zero multiple of 2^-53, and the strict comparisons never decide against 0), and
    decides only beyond the margin 8u·p̂. Otherwise (probability ≈ 2^-49 per cell edge
    in the piece, near the draw) the comparison is done in exact rationals
    (``fractions``) with 64 more bits of U per round until it is certain (U·T hits an
    edge with probability 0). Every comparison returned is certain, so the output law
    is exact; the output is a deterministic function of (a, b), the public grid and the
    generator's words. Block cells come from one exact uniform integer per draw
    (``Generator.integers``, drawn for every draw, so the number of generator calls
    depends on the public size only, except in the exact branch).
    """
    inv = 1.0 / grid.cell  # a power of two: exact
    qa, qb = a * inv, b * inv
    ja = np.floor(qa)
    jb = np.ceil(qb) - 1.0
    if grid.cell > 1.0:  # public: only then can a non-zero a/θ_g underflow to ±0
        ja -= (qa == 0) & (a < 0)
        jb += (qb == 0) & (b > 0)
    ca = ja - grid.first  # in 0 … N − 1 since lo ≤ a < b ≤ hi
    cb = jb - grid.first
    total = b - a
    e1 = np.minimum((ja + 1.0) * grid.cell, b)  # = min(E_{ca+1}, b)
    eb = np.maximum(jb * grid.cell, grid.low)  # = E_cb
    p1 = (e1 - a) / total
    q3 = (b - eb) / total
    words = rng.integers(0, _WORD_MAX, size=a.size, dtype=np.uint64, endpoint=True)
    u_lo = (words >> np.uint64(11)).astype(np.float64) * _U53
    u_hi = u_lo + _U53
    first = u_hi < p1 * (1.0 - _CELL_TOL)
    not_first = u_lo > p1 * (1.0 + _CELL_TOL)
    last = (1.0 - u_lo) < q3 * (1.0 - _CELL_TOL)
    not_last = (1.0 - u_hi) > q3 * (1.0 + _CELL_TOL)
    count = cb - ca - 1.0  # block size (≥ 0 when cb > ca)
    # 0 first, 1 block, 2 last, −1 undecided; cb ≤ ca: one cell, nothing to decide
    part = np.where(first | (cb <= ca), 0,
                    np.where(not_first & (last | (count <= 0)), 2,
                             np.where(not_first & not_last, 1, -1)))
    undecided = np.flatnonzero(part < 0)
    for i in undecided:
        part[i] = _cell_part_exact(float(a[i]), float(b[i]), float(e1[i]), float(eb[i]),
                                   int(words[i]), rng)
    offset = rng.integers(0, np.maximum(count, 1.0).astype(np.int64))
    return np.where(part == 0, ca, np.where(part == 2, cb, ca + 1.0 + offset)).astype(np.int64)


def _choose_cell1(grid: _OutputGrid, a: float, b: float, rng: np.random.Generator) -> int:
    """One draw of :func:`_choose_cells` on Python floats (the same decisions)."""
    cell = grid.cell
    qa, qb = a / cell, b / cell
    ja = math.floor(qa) - (qa == 0 and a < 0)
    jb = math.ceil(qb) - 1 + (qb == 0 and b > 0)
    ca = ja - grid.first
    cb = jb - grid.first
    e1 = min((ja + 1) * cell, b)
    eb = max(jb * cell, grid.low)
    total = b - a
    p1 = (e1 - a) / total
    q3 = (b - eb) / total
    word = int(rng.integers(0, _WORD_MAX, dtype=np.uint64, endpoint=True))
    u_lo = (word >> 11) * _U53
    u_hi = u_lo + _U53
    count = cb - ca - 1
    if cb <= ca or u_hi < p1 * (1.0 - _CELL_TOL):
        part = 0
    elif u_lo > p1 * (1.0 + _CELL_TOL) and (count <= 0 or (1.0 - u_lo) < q3 * (1.0 - _CELL_TOL)):
        part = 2
    elif u_lo > p1 * (1.0 + _CELL_TOL) and (1.0 - u_hi) > q3 * (1.0 + _CELL_TOL):
        part = 1
    else:
        part = _cell_part_exact(a, b, e1, eb, word, rng)
    offset = int(rng.integers(0, max(count, 1)))
    return ca if part == 0 else cb if part == 2 else ca + 1 + offset


def _cell_part_exact(
    a: float, b: float, e1: float, eb: float, word: int, rng: np.random.Generator
) -> int:
    """First (0), block (1) or last (2) by exact comparisons (:func:`_choose_cells`)."""
    fa = Fraction(a)
    total = Fraction(b) - fa
    c1 = Fraction(e1) - fa  # U·T < c1: first
    c2 = Fraction(eb) - fa  # U·T ≥ c2: last (c2 = c1 when the block is empty)
    num, bits = word, 64
    while True:
        lo = Fraction(num, 1 << bits) * total
        hi = Fraction(num + 1, 1 << bits) * total
        if hi <= c1:
            return 0
        if lo >= c2:
            return 2
        if lo >= c1 and hi <= c2:
            return 1
        num = (num << 64) | int(rng.integers(0, _WORD_MAX, dtype=np.uint64, endpoint=True))
        bits += 64


def _cell_average(
    law: PiecewiseConstantLaw, grid: _OutputGrid, piece_loss: NDArray[np.int64], cap: int
) -> tuple[PiecewiseConstantLaw, NDArray[np.float64]]:
    """The law of the snapped output (``law`` averaged over each public cell) and the law
    of the mechanism's loss p_α(D, L) at the *released* point L, O(n log n).

    The new pieces are public cells: one cell per cell that holds an edge of ``law`` and
    runs of whole cells in between (where the density is unchanged). Every sub-piece
    (intersection of an old piece and a new one) adds its exact mass in log-space. p_α(D, ·)
    is constant on the old pieces (``piece_loss``), and the released L has the averaged
    density, so P(p_α(D, L) = v) sums, over the sub-pieces of old pieces with loss v, the
    averaged density times the sub-piece's length.
    """
    e = law.edges
    c = grid.index(e)
    bounds = np.unique(np.concatenate((c, c + 1, [0, grid.n_cells])))
    new_edges = grid.edge(bounds)
    new_edges[0], new_edges[-1] = grid.low, grid.high
    new_edges = np.unique(new_edges)
    sub = np.unique(np.concatenate((e, new_edges)))
    mids = 0.5 * (sub[:-1] + sub[1:])
    old = np.clip(np.searchsorted(e, mids, side="right") - 1, 0, law.n_pieces - 1)
    new = np.clip(np.searchsorted(new_edges, mids, side="right") - 1, 0, new_edges.size - 2)
    with np.errstate(divide="ignore"):
        log_len = np.log(np.diff(sub))
    log_sub = log_len + law.log_levels[old]
    log_new = np.full(new_edges.size - 1, -np.inf)
    np.logaddexp.at(log_new, new, log_sub)
    with np.errstate(divide="ignore"):
        levels = log_new - np.log(np.diff(new_edges))
    averaged = PiecewiseConstantLaw(new_edges, np.where(np.isfinite(levels), levels, -1e300))
    released_mass = np.exp(averaged.log_levels[new] + log_len - averaged.log_norm)
    loss_pmf = np.bincount(piece_loss[old], weights=released_mass, minlength=cap + 1)
    return averaged, loss_pmf.astype(np.float64)


class _FacilityRelease(abc.ABC):
    """The ``sample`` of every facility mechanism: validate, charge ``size·ε``, then draw.

    Subclasses are frozen dataclasses with fields ``epsilon`` and ``domain``; they name
    their ledger label and implement :meth:`_draw` on the validated copy of the data.
    """

    epsilon: float
    domain: tuple[float, float]
    _ledger_label: ClassVar[str]

    def sample(
        self,
        x: ArrayLike,
        rng: RandomLike = None,
        size: int | None = None,
        *,
        accountant: Accountant | None = None,
    ) -> Any:
        """Release a private facility location (or ``size`` independent ones).

        Parameters
        ----------
        x : array-like of shape (n,)
            Agent locations, all inside ``domain`` (NaN, inf, empty data or a location
            outside the domain raise :class:`~dpfair.InvalidDataError`).
        rng : None, int, SeedSequence or Generator, default=None
            Randomness; ``None`` uses fresh OS entropy (do this in deployments).
        size : int or None, default=None
            ``None``: one location (a float). An int: that many independent draws (an
            array), costing ``size·ε`` in total.
        accountant : Accountant, optional
            If given, charged ``size·ε`` (pure DP) *before* anything is drawn; a
            :class:`~dpfair.BudgetExceededError` leaves nothing released.

        Returns
        -------
        float or ndarray
            Exact draw(s) from :meth:`distribution`.
        """
        count = 1
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
                raise InvalidParameterError(
                    f"size={size!r}: expected None (one location) or a non-negative integer."
                )
            count = int(size)
        gen = as_generator(rng)
        xs = check_locations(x, self.domain)
        if accountant is not None:
            accountant.charge(Budget.pure(self.epsilon * count), label=self._ledger_label)
        return self._draw(xs, gen, count, size)

    @abc.abstractmethod
    def _draw(
        self, xs: NDArray[np.float64], gen: np.random.Generator, count: int, size: int | None
    ) -> Any:
        """``count`` draws on the validated copy ``xs`` (one float when ``size`` is None)."""


@dataclass(frozen=True)
class DPExpMed(_FacilityRelease):
    """Widened exponential mechanism DPExpMed_α for private facility location (paper 000).

    Places one facility on the public interval ``domain`` from the agents' private
    locations, with density ∝ exp(−ε·p_α(D, ℓ)/2) where p_α is the widened percentile
    loss (Defs. 7.3–7.5).

    Parameters
    ----------
    epsilon : float
        Privacy parameter ε > 0 (pure ε-DP per released location).
    domain : (lo, hi)
        Public domain V = [lo, hi] with lo < hi; every location must lie in it (an error,
        not clipping, otherwise). Never derive it from the data.
    widening : float or None, default=None
        α ≥ 0; the loss-0 band around the median is [T − αm, T + αm]. ``None`` uses
        α* = 1/(nε) (Cor. 7.10), optimal for FAIR up to constants; 0 gives the unwidened
        mechanism. The default treats n as public (replace-one neighbours); if the number
        of agents is itself private (add/remove neighbours), pass a fixed widening chosen
        without the data, e.g. 1/(n₀ε) for a public guess n₀: the default is then not
        private (module docstring).
    median : {"lower", "upper"}, default="lower"
        For even n, the end of the optimal interval [x_(n/2), x_(n/2+1)] the loss is
        centred on (the lower median by default; for odd n both are the median).

    Notes
    -----
    Privacy: pure ε-DP under replace-one neighbours (Lemma 7.6), where n is public; with
    a fixed ``widening`` also under add/remove neighbours (not with the default, which
    depends on n). p_α has sensitivity 1 because the counts #{x_i ≤ a} and #{x_i < a}
    it is built from change by at most 1, and an exponential mechanism with density
    ∝ exp(−ε·loss/2) on a sensitivity-1 loss has density ratio ≤ e^ε between neighbours
    (derivation in
    :mod:`dpfair.facility._mechanism` and ``docs/proofs/facility_dpexpmed.md``). It is also
    ε-bounded-range, hence ε²/8-zCDP (:attr:`privacy_zcdp`). Drawing ``size`` locations
    from one data set is ``size`` releases: ``size·ε`` by basic composition.

    As executed: the loss built from the computed binary64 edges fl(x_i ∓ αm) is itself a
    sensitivity-1 loss (counts of per-record monotone transforms), the piece and then the
    public output cell are chosen by exact samplers, and the released number is computed
    from the cell index and public numbers only (module docstring; §5a of the proof).

    Cost: :meth:`sample` is O(n) expected (selection, no full sort) and exact;
    :meth:`distribution` is O(n log n) (one sort) and O(n) after it.

    References
    ----------
    Fish, Gonczarowski, Tang & Vadhan, "Tradeoffs in Privacy, Welfare, and Fairness for
    Facility Location", FORC 2026, §7.1 (Defs. 7.3–7.5, Lemma 7.6, Cor. 7.10).

    Examples
    --------
    >>> import numpy as np
    >>> from dpfair.facility import DPExpMed
    >>> x = np.random.default_rng(0).triangular(-0.5, 0.0, 0.5, 1001)
    >>> mech = DPExpMed(epsilon=1.0, domain=(-0.5, 0.5))
    >>> loc = mech.sample(x, rng=1)
    >>> dist = mech.distribution(x)
    >>> round(dist.expected_fair(), 4) < 0.01
    True
    """

    epsilon: float
    domain: tuple[float, float]
    widening: float | None = None
    median: MedianChoice = "lower"

    def __post_init__(self) -> None:
        eps = check_positive("epsilon", self.epsilon)
        if eps < _MIN_EPSILON:
            raise InvalidParameterError(
                f"epsilon={self.epsilon!r}: below {_MIN_EPSILON:g} the output is uniform on "
                "the domain to within 1e-80 in every probability (nothing is learnt), and "
                "the default widening 1/(n*epsilon) overflows a double; use a meaningful "
                "budget (typically 0.01 <= epsilon <= 10)."
            )
        lo, hi = check_interval_bounds("domain", self.domain, example="(0.0, 1.0)")
        if self.widening is not None:
            w = self.widening
            bad = isinstance(w, bool)
            try:
                wf = float(w)
            except (TypeError, ValueError):
                bad = True
                wf = math.nan
            if bad or not math.isfinite(wf) or wf < 0:
                raise InvalidParameterError(
                    f"widening={w!r}: must be a finite number >= 0 (0 is the unwidened "
                    "mechanism; None uses the default 1/(n*epsilon))."
                )
            object.__setattr__(self, "widening", wf)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "domain", (lo, hi))
        object.__setattr__(self, "median", check_median(self.median))

    # ------------------------------------------------------------------ guarantee
    @property
    def privacy(self) -> Budget:
        """Pure ε-DP per released location (replace-one neighbours)."""
        return Budget.pure(self.epsilon, note="DPExpMed: exponential mechanism, sensitivity 1")

    @property
    def privacy_zcdp(self) -> Budget:
        """ε²/8-zCDP per released location (bounded-range property)."""
        return exponential_mechanism_zcdp(self.epsilon)

    @property
    def diameter(self) -> float:
        """m = hi − lo."""
        return self.domain[1] - self.domain[0]

    def widening_for(self, n: int) -> float:
        """The α used for n agents: ``widening`` or, if None, α* = 1/(nε)."""
        if self.widening is not None:
            return float(self.widening)
        return 1.0 / (n * self.epsilon)

    # ------------------------------------------------------------------ exact law
    def distribution(self, x: ArrayLike, *, presorted: bool = False) -> FacilityDistribution:
        """The exact output law on data ``x`` (pdf, cdf, ppf, sample, FAIR and SWDIFF laws).

        Parameters
        ----------
        x : array-like of shape (n,)
            Agent locations, all inside ``domain``.
        presorted : bool, default=False
            Skip the sort when ``x`` is already non-decreasing (checked in O(n)); the
            build is then O(n).

        Returns
        -------
        FacilityDistribution

        Notes
        -----
        The law is a function of the private data: it is for analysts who hold the data
        (exact error reports, tests, experiments). Releasing it is not private; a release
        is one draw, :meth:`sample`.
        """
        xs = check_locations(x, self.domain)
        if presorted:
            if xs.size > 1 and np.any(xs[1:] < xs[:-1]):
                raise InvalidDataError(
                    "x: presorted=True but x is not in non-decreasing order. Sort it or pass "
                    "presorted=False."
                )
        else:
            xs.sort()
        n = xs.size
        k = median_index(n, self.median)
        alpha = self.widening_for(n)
        lo, hi = self.domain
        law = _law_from_sorted(xs, k, alpha * (hi - lo), self.epsilon, lo, hi)
        cap = loss_cap(n, k)
        piece_loss = np.minimum(np.abs(np.arange(law.n_pieces) - k), cap).astype(np.int64)
        # The released L (a uniform point of the public cell of the draw) has the
        # cell-averaged law; loss_pmf is the law of p_α(D, L) at that released point.
        averaged, loss_pmf = _cell_average(law, _OutputGrid.for_domain(lo, hi), piece_loss, cap)
        return FacilityDistribution(
            law=averaged,
            profile=Profile.from_sorted(xs, self.median),
            domain=self.domain,
            epsilon=self.epsilon,
            widening=alpha,
            median=self.median,
            loss_probabilities=loss_pmf,
        )

    def loss(self, x: ArrayLike, loc: ArrayLike) -> NDArray[np.int64]:
        """The mechanism's widened loss p_α(D, ℓ) at location(s) ``loc``."""
        prof = sorted_profile(x, self.domain, self.median)
        locs = np.atleast_1d(np.asarray(loc, dtype=np.float64))
        return prof.widened_loss(locs, self.widening_for(prof.n) * self.diameter)

    # ------------------------------------------------------------------ release
    _ledger_label: ClassVar[str] = "facility/DPExpMed"

    def _draw(
        self, xs: NDArray[np.float64], gen: np.random.Generator, count: int, size: int | None
    ) -> Any:
        """Exact draws, in O(n) expected time without sorting the data (module docstring)."""
        a, b = _choose_piece_edges(
            xs,
            epsilon=self.epsilon,
            domain=self.domain,
            alpha=self.widening_for(xs.size),
            k=median_index(xs.size, self.median),
            size=count,
            rng=gen,
        )
        # Released: a uniform point of an exactly chosen public cell (THREATS.md rule 6).
        draws = _OutputGrid.for_domain(*self.domain).release(a, b, gen)
        if size is None:
            return float(draws[0])
        return draws


def _window_half_width(epsilon: float, alpha: float, n: int) -> int:
    """W with m·e^{−ε(W+1)/2} ≤ 1e-12 · (mass of the loss-0 band, ≥ min(α, 1)·m)."""
    band_frac = min(alpha, 1.0) if alpha > 0 else 1.0 / max(n, 1)
    w = 2.0 * (math.log(1.0 / band_frac) + _WINDOW_LOG_RATIO) / epsilon
    if not w < n + 2:  # the window covers every piece (also when w overflows to inf)
        return n + 2
    return max(math.ceil(w), 1)


def _sample_windowed(xc: NDArray[np.float64], **piece_args: Any) -> NDArray[np.float64]:
    """Draws ℓ of the mechanism's continuous law before the public cell (analysis, tests).

    Takes exactly the arguments of :func:`_choose_piece_edges` (keywords ``epsilon``,
    ``domain``, ``alpha``, ``k``, ``size``, ``rng`` and optionally ``half_width``), which
    chooses the piece exactly; the point inside it is fl(a + u(b − a)) with u from the
    same ``rng``, a binary64 computation on data-dependent edges that no release uses
    (:meth:`DPExpMed.sample` chooses the cell exactly instead).
    """
    a, b = _choose_piece_edges(xc, **piece_args)
    rng: np.random.Generator = piece_args["rng"]
    return np.minimum(a + rng.random(a.size) * (b - a), b)


def _choose_piece_edges(
    xc: NDArray[np.float64],
    *,
    epsilon: float,
    domain: tuple[float, float],
    alpha: float,
    k: int,
    size: int,
    rng: np.random.Generator,
    half_width: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Edges (a, b) of exactly chosen pieces of DPExpMed on unsorted validated data ``xc``
    (modified in place); P(piece j) ∝ (e_{j+1} − e_j)·e^{−c·loss_j}, exactly.

    ``half_width`` overrides the window (tests use a tiny one to exercise the fallback).
    """
    lo, hi = domain
    m = hi - lo
    n = xc.size
    band = alpha * m
    cap = loss_cap(n, k)
    n_pieces = n + 2
    rate = exact_rate(epsilon)  # c = ε/2 per unit of loss, exactly
    if half_width is None and band <= 4.0 * math.ulp(max(abs(lo), abs(hi))):
        # α = 0 (or a band below the float spacing on V): no public lower bound on any
        # window's mass (a tie block around T makes every window piece empty), so no
        # data-independent window exists. Sort and draw from the full law: O(n log n),
        # with no branch on the data.
        xc.sort()
        law = _law_from_sorted(xc, k, band, epsilon, lo, hi)
        units = np.minimum(np.abs(np.arange(n_pieces) - k), cap)
        idx = choose_pieces(PieceMasses.lengths(law.edges), units, rate, rng, size)
        return law.edges[idx], law.edges[idx + 1]
    w = _window_half_width(epsilon, alpha, n) if half_width is None else int(half_width)
    xc.partition(k - 1)  # xc[k-1] = T; left part ≤ T, right part ≥ T

    # One window, fixed by public quantities (ε, α, n): its loss-0 piece has length
    # ≥ min(α, 1)·m, so U_out = m·e^{−c·min(cap, W+1)} ≤ 1e-12 × the window's mass.
    p_lo, p_hi = max(0, k - w), min(n_pieces - 1, k + w)  # window pieces
    r_lo, r_hi = max(1, p_lo), min(n, p_hi)  # 1-based ranks of the x's needed
    # bring ranks r_lo..r_hi into place, sorted
    if r_lo < k:
        left = xc[: k - 1]
        if r_lo - 1 > 0:
            left.partition(r_lo - 1)
        left[r_lo - 1 :].sort()
    if r_hi > k:
        right = xc[k:]
        if r_hi - k < right.size:
            right.partition(r_hi - k - 1)
        right[: r_hi - k].sort()
    xw = xc[r_lo - 1 : r_hi]  # sorted ranks r_lo..r_hi

    def x_at(rank: NDArray[np.intp]) -> Any:
        return xw[np.clip(rank - r_lo, 0, xw.size - 1)]

    j = np.arange(p_lo, p_hi + 2)  # edge indices
    edges = np.where(j <= k, x_at(j) - band, x_at(j - 1) + band)
    edges = np.where(j == 0, lo, np.where(j == n + 2, hi, edges))
    np.clip(edges, lo, hi, out=edges)
    units = np.minimum(np.abs(np.arange(p_lo, p_hi + 1) - k), cap)
    outside = None
    if not (p_lo == 0 and p_hi == n_pieces - 1):  # Σ exact lengths = hi − lo
        outside = (Fraction(hi) - Fraction(lo), min(cap, w + 1))
    full_edges: list[NDArray[np.float64]] = []

    def full() -> tuple[NDArray[np.bool_], PieceMasses, NDArray[np.int64]]:
        e_full = _law_from_sorted(np.sort(xc), k, band, epsilon, lo, hi).edges
        full_edges.append(e_full)
        piece = np.arange(n_pieces)
        return ((piece >= p_lo) & (piece <= p_hi), PieceMasses.lengths(e_full),
                np.minimum(np.abs(piece - k), cap))

    idx, inside = choose_windowed(PieceMasses.lengths(edges), units, rate, outside, full, rng,
                                  size)
    a = np.empty(idx.size)
    b = np.empty(idx.size)
    a[inside] = edges[idx[inside]]
    b[inside] = edges[idx[inside] + 1]
    if not inside.all():
        a[~inside] = full_edges[0][idx[~inside]]
        b[~inside] = full_edges[0][idx[~inside] + 1]
    return a, b

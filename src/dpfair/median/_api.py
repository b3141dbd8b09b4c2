"""Public entry points: :func:`confidence_interval` and :func:`nonprivate_interval`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InsufficientDataError, InvalidDataError, InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import (
    check_finite_1d,
    check_in_open_interval,
    check_interval_bounds,
    check_positive,
    finite_clipped_copy,
    finite_float64_view,
)
from dpfair.mechanisms import GaussianMechanism, leaf_counts_sorted, leaf_edges
from dpfair.median._binsearch import binsearch_interval, binsearch_target_ranks, grid_depth
from dpfair.median._cdf import cdf_interval
from dpfair.median._expmech import SortedCounts, expmech_interval
from dpfair.median._ranks import nonprivate_ranks
from dpfair.median._result import DPCdf, MedianInterval, NonPrivateInterval
from dpfair.privacy import Budget

__all__ = [
    "DEFAULT_GRANULARITY_FRACTION",
    "METHODS",
    "aggregation_depth",
    "confidence_interval",
    "confidence_interval_from_counts",
    "nonprivate_interval",
]

Method = Literal["expmech", "cdf", "binsearch", "binsearch_cdf"]
METHODS: Final[tuple[str, ...]] = ("expmech", "cdf", "binsearch", "binsearch_cdf")

#: Default θ as a fraction of |R|, per method (the paper's setting: R = [−5, 15] with
#: θ = 0.005 for ExpMech and θ = 0.05 for the tree-based methods).
DEFAULT_GRANULARITY_FRACTION: Final[dict[str, float]] = {
    "expmech": 0.005 / 20.0,
    "cdf": 0.05 / 20.0,
    "binsearch": 0.05 / 20.0,
    "binsearch_cdf": 0.05 / 20.0,
}

#: Largest tree depth accepted (2^24 bins); a finer θ would not be a sensible grid.
_MAX_DEPTH: Final[int] = 24


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise InvalidParameterError(
            f"method={method!r}: unknown method; choose one of {', '.join(METHODS)}."
        )


def _check_request(
    rho: float, alpha: float, bounds: tuple[float, float] | None, method: str
) -> tuple[float, float, tuple[float, float]]:
    """Validate the arguments every entry point shares; returns (rho, alpha, bounds)."""
    r = check_positive("rho", rho)
    if not math.isfinite(1.0 / r):  # subnormal ρ: every noise scale ∝ 1/√ρ overflows
        raise InvalidParameterError(
            f"rho={rho!r}: too small to compute the noise scale in double precision (1/rho "
            "overflows); use a meaningful budget (typically 0.01 <= rho <= 10)."
        )
    a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
    bnds = check_interval_bounds("bounds", bounds, example="(-5.0, 15.0)")
    _check_method(method)
    return r, a, bnds


def nonprivate_interval(x: ArrayLike, alpha: float = 0.05) -> NonPrivateInterval:
    """Classical distribution-free confidence interval for the median (NOT private).

    Parameters
    ----------
    x : array-like of shape (n,)
        Sample; NaN/inf raise.
    alpha : float, default=0.05
        Miscoverage, in (0, 1).

    Returns
    -------
    NonPrivateInterval
        [x_(kL), x_(kU)] with the exact binomial ranks of :func:`nonprivate_ranks`:
        P(med < x_(kL)) = P(B ≤ kL − 1) ≤ α/2 with B ~ Bin(n, 1/2), and symmetrically.

    Notes
    -----
    This releases order statistics of the data: use it as the reference for the relative
    width of a private interval, never as a release.
    """
    a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
    arr = np.sort(check_finite_1d("x", x))
    n = arr.size
    k_low, k_high = nonprivate_ranks(n, a)
    med = float(0.5 * (arr[(n - 1) // 2] + arr[n // 2]))
    return NonPrivateInterval(float(arr[k_low - 1]), float(arr[k_high - 1]), med, k_low,
                              k_high, a, n)


def confidence_interval(
    x: ArrayLike,
    rho: float,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    method: Method | str = "expmech",
    granularity: float | None = None,
    rng: RandomLike = None,
) -> MedianInterval:
    """Differentially private (1 − α)-confidence interval for the population median.

    Parameters
    ----------
    x : array-like of shape (n,)
        The private sample. NaN/inf raise; n is treated as public (replace-one neighbours).
    rho : float
        zCDP budget, > 0. The whole budget is spent; ``result.privacy`` reports it.
    bounds : (float, float)
        Public range R = [lo, hi] promised to contain the population median. Data are
        clipped into R — on a copy, or (ExpMech on a float64 array) as each record it reads
        is read; the caller's array is never modified. Clipping leaves the rank of any
        median inside R unchanged, which is all the coverage argument needs. Required:
        never taken from the data.
    alpha : float, default=0.05
        Miscoverage in (0, 1); coverage ≥ 1 − α for every continuous population with its
        median in R.
    method : {"expmech", "cdf", "binsearch", "binsearch_cdf"}, default="expmech"
        ``"expmech"``: two exponential-mechanism order statistics (paper 004, ExpMech).
        ``"cdf"``: noisy binary tree + Honaker post-processing + exact per-point tests
        (CDFPostProcess); the DP CDF is returned in ``result.cdf``.
        ``"binsearch"``: noisy binary search (NoisyBinSearch).
        ``"binsearch_cdf"``: NoisyBinSearch with ρ/4 at level α/4 to find a sub-range, then
        CDFPostProcess with 3ρ/4 at level 3α/4 inside it (BinSearch+CDF).
    granularity : float, optional
        θ > 0, at most |R|/4. Default |R|/4000 for ExpMech and |R|/400 for the tree-based
        methods (the paper's θ = 0.005 and 0.05 on R = [−5, 15]).
    rng : None, int, SeedSequence or Generator
        Randomness; ``None`` uses OS entropy.

    Returns
    -------
    MedianInterval

    Raises
    ------
    InvalidParameterError
        Bad ``rho``, ``bounds``, ``alpha``, ``method`` or ``granularity``.
    InvalidDataError
        Empty data, NaN or inf.
    InsufficientDataError
        n too small for any valid interval at this α (and, for the rank-based methods, at
        this ρ).

    Notes
    -----
    Privacy: ρ-zCDP under replace-one neighbours, for every method; see each method's
    module docstring for the derivation of its noise scale. The interval's end-points are
    computed from public quantities and DP releases only.

    Coverage is derived for continuous populations, where B = #{x_i ≤ med} ~ Bin(n, 1/2).
    It also holds with atoms (ties, integer data): for any median m, #{x_i ≤ m} is
    stochastically *larger* and #{x_i < m} stochastically *smaller* than Bin(n, 1/2), and
    each end's conditional failure bound is monotone in the right direction (non-increasing
    in the first count for the lower end, non-decreasing in the second for the upper end),
    so the same target ranks and thresholds stay valid, only more conservative.

    This is the q = ½ case of :func:`dpfair.quantiles.confidence_interval` with
    ``localize=False`` (identical output for the same seed). The quantile function's
    default adds a charged private localisation stage, which is narrower on most designs
    and does not depend on how wide ``bounds`` is (``docs/quantiles.md``).

    Examples
    --------
    >>> import numpy as np, dpfair
    >>> x = np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 1000)
    >>> r = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), rng=1)
    >>> r.low < 1.5 < r.high
    True
    """
    r, a, (lo, hi) = _check_request(rho, alpha, bounds, method)
    theta = _theta(str(method), (lo, hi), granularity)
    if method == "expmech":
        # ExpMech reads only a window around each target rank (selection, not a full
        # sort), clipping what it reads: a float64 array is only tested finite (read, no
        # copy of n values); any other input becomes our own finite, clipped copy.
        raw = finite_float64_view("x", x)
        data = raw if raw is not None else finite_clipped_copy("x", x, lo, hi)
        nonprivate_ranks(data.size, a)  # raises if no interval at all can have this coverage
        source = _ArraySource(data, is_sorted=False, clipped=raw is None)
    else:
        # our own finite, clipped copy (one pass), sorted: the caller's array is untouched;
        # the tree methods read counts and prefix counts off it.
        data = finite_clipped_copy("x", x, lo, hi)
        nonprivate_ranks(data.size, a)
        data.sort()
        source = _ArraySource(data)
    return _run(source, r, (lo, hi), a, str(method), theta, as_generator(rng))



#: Smallest grid step accepted: steps near the subnormal range lose exactness (public check).
_MIN_THETA = 2.0**-1000


def _theta(method: str, bounds: tuple[float, float], granularity: float | None) -> float:
    """The grid step θ: the method's default fraction of |R|, or a checked ``granularity``
    (at most |R|/4, and at most 2^_MAX_DEPTH bins for the tree and search methods)."""
    lo, hi = bounds
    width = hi - lo
    if granularity is None:
        theta = width * DEFAULT_GRANULARITY_FRACTION[method]
    else:
        theta = check_positive("granularity", granularity)
        if theta > width / 4.0:
            raise InvalidParameterError(
                f"granularity={granularity!r}: must be at most a quarter of the range width "
                f"({width / 4.0:g}); pick a finer granularity."
            )
    if not theta >= _MIN_THETA:
        raise InvalidParameterError(
            f"bounds={bounds!r}, granularity={theta:g}: the grid step is below 2^-1000, where "
            "floating point loses the exactness the release needs (subnormal numbers); "
            "rescale the data and the bounds (e.g. multiply both by a public power of two)."
        )
    if method != "expmech" and grid_depth(width, theta) > _MAX_DEPTH:
        raise InvalidParameterError(
            f"granularity={theta:g}: needs more than 2^{_MAX_DEPTH} bins over the range "
            f"{bounds}; use a coarser granularity."
        )
    return theta

class _ArraySource:
    """In-memory data; sorted unless ``is_sorted`` is False, clipped into R unless
    ``clipped`` is False (both False: the caller's array, read by ExpMech only)."""

    def __init__(self, x_sorted: NDArray[np.float64], *, is_sorted: bool = True,
                 clipped: bool = True) -> None:
        if is_sorted and not clipped:
            raise ValueError("an unclipped source must be unsorted (ExpMech's raw read)")
        self.x = x_sorted
        self.n = int(x_sorted.size)
        self.is_sorted = is_sorted
        self.clipped = clipped

    def sorted_sample(self) -> NDArray[np.float64] | SortedCounts:
        return self.x

    def leaves(self, bounds: tuple[float, float], depth: int) -> NDArray[np.int64]:
        return leaf_counts_sorted(self.x, bounds, depth, check=False)

    def prefix(self, bounds: tuple[float, float], depth: int) -> NDArray[np.int64]:
        grid = leaf_edges(bounds, depth)
        out = np.searchsorted(self.x, grid, side="right").astype(np.int64)
        out[-1] = self.n
        return out


class _CountsSource:
    """Aggregated data: leaf counts over 2^D bins of R, plus an optional refinement query."""

    def __init__(self, counts: NDArray[np.int64], bounds: tuple[float, float],
                 refine: CountsProvider | None) -> None:
        self.counts = counts
        self.bounds = bounds
        self.depth = round(math.log2(counts.size))
        self.refine = refine
        self.n = int(counts.sum())

    def sorted_sample(self) -> NDArray[np.float64] | SortedCounts:
        # Every record is represented by the upper edge of its bin (see Notes).
        return SortedCounts(leaf_edges(self.bounds, self.depth)[1:], self.counts)

    def leaves(self, bounds: tuple[float, float], depth: int) -> NDArray[np.int64]:
        if bounds == self.bounds and depth == self.depth:
            return self.counts
        if self.refine is None:
            raise InvalidParameterError(
                "counts: method='binsearch_cdf' needs a second aggregation over the "
                "sub-range found by its first stage; pass refine=callable(bounds, depth) "
                "returning leaf counts (the file path does this through DuckDB)."
            )
        name = f"refine(bounds={bounds!r}, depth={depth})"
        out = _check_counts(name, self.refine(bounds, depth), depth)
        total = int(out.sum())
        if total != self.n:
            raise InvalidDataError(
                f"{name}: the counts sum to {total}, but the data have n = {self.n} records "
                "(the sum of `counts`). refine must count every record after clipping it "
                "into the sub-range (np.clip to those bounds, as histogram_counts does), not "
                "only the records inside it: its total is used as the public size of the "
                "second stage, so any other total breaks the interval's coverage."
            )
        return out

    def prefix(self, bounds: tuple[float, float], depth: int) -> NDArray[np.int64]:
        leaves = self.leaves(bounds, depth)
        return np.concatenate(([0], np.cumsum(leaves))).astype(np.int64)


def _check_counts(name: str, counts: ArrayLike, depth: int | None = None) -> NDArray[np.int64]:
    arr = np.asarray(counts)
    if arr.ndim != 1 or arr.size < 2 or (arr.size & (arr.size - 1)) != 0:
        raise InvalidDataError(
            f"{name}: expected a 1-D array of leaf counts whose length is a power of two "
            f"(2^D bins over the range), got shape {arr.shape}."
        )
    if depth is not None and arr.size != 2**depth:
        raise InvalidDataError(f"{name}: expected {2**depth} bins, got {arr.size}.")
    if (
        arr.dtype.kind not in "iuf"
        or not np.all(np.isfinite(arr))
        or np.any(arr < 0)
        or np.any(arr != np.round(arr))
    ):
        raise InvalidDataError(
            f"{name}: counts must be finite non-negative integers (got dtype {arr.dtype})."
        )
    return arr.astype(np.int64)


def _run(source: _ArraySource | _CountsSource, rho: float, bounds: tuple[float, float],
         alpha: float, method: str, theta: float, gen: np.random.Generator,
         extra: dict[str, Any] | None = None) -> MedianInterval:
    lo, hi = bounds
    cdf: DPCdf | None = None
    diagnostics: dict[str, Any]
    if method == "expmech":
        presorted = not isinstance(source, _ArraySource) or source.is_sorted
        raw = isinstance(source, _ArraySource) and not source.clipped
        low, high, spent, diagnostics = expmech_interval(source.sorted_sample(), rho, bounds,
                                                         alpha, theta, gen, presorted=presorted,
                                                         clip=raw)
        if isinstance(source, _CountsSource):  # records sit at upper bin edges: widen
            low = max(lo, low - (hi - lo) / 2**source.depth)
    elif method == "binsearch":
        depth = grid_depth(hi - lo, theta)
        low, high, spent, diagnostics = binsearch_interval(source.prefix(bounds, depth), rho,
                                                           bounds, alpha, gen)
    elif method == "cdf":
        depth = grid_depth(hi - lo, theta)
        low, high, spent, diagnostics, cdf = cdf_interval(source.leaves(bounds, depth), rho,
                                                          bounds, alpha, depth, gen)
    else:
        low, high, spent, diagnostics = _binsearch_then_cdf(source, rho, bounds, alpha, theta,
                                                            gen)
    if extra:
        diagnostics = {**diagnostics, **extra}
    return MedianInterval(low=low, high=high, estimate=0.5 * (low + high), method=method,
                          alpha=alpha, n=source.n, bounds=bounds, granularity=theta,
                          privacy=spent, diagnostics=diagnostics, cdf=cdf)


def _binsearch_then_cdf(
    source: _ArraySource | _CountsSource,
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    theta: float,
    gen: np.random.Generator,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """BinSearch+CDF (paper 004, §3): ρ/4 and α/4 to localise, 3ρ/4 and 3α/4 to refine.

    If the first stage has no valid target rank (small n: decided from public n, ρ, α and
    the grid only), it is skipped and CDFPostProcess runs on R with ρ and α.

    Coverage: P(miss) ≤ P(med ∉ R₂) + P(med ∈ R₂, stage 2 misses) ≤ α/4 + 3α/4, where the
    second term uses the envelope thresholds of :mod:`dpfair.median._cdf` because R₂ is
    data-dependent. Privacy: ρ/4 + 3ρ/4 = ρ (zCDP composition). Stage 2 keeps the depth
    of the full-range grid (public), so its bins are finer than θ.
    """
    lo, hi = bounds
    depth = grid_depth(hi - lo, theta)
    try:
        binsearch_target_ranks(
            source.n, GaussianMechanism.for_zcdp(rho / 4.0 / (2.0 * depth)).sigma, depth,
            alpha / 4.0)
    except InsufficientDataError:
        # The localisation stage has no valid rank (a public fact: n, ρ, α and the grid
        # only). Skip it: CDFPostProcess on R with the whole ρ and α, which is valid on its
        # own (R is public, so no envelope is needed). Before issue 22 this raised.
        low, high, spent, diag, _ = cdf_interval(source.leaves(bounds, depth), rho, bounds,
                                                 alpha, depth, gen)
        note = "skipped: no valid localisation rank at rho/4, alpha/4; ran cdf on R"
        return low, high, spent, {"stage1": note, "stage2": diag}
    l1, u1, spent1, diag1 = binsearch_interval(source.prefix(bounds, depth), rho / 4.0,
                                               bounds, alpha / 4.0, gen)
    r_lo, r_hi = min(l1, u1), max(l1, u1)
    if r_hi - r_lo < theta:  # degenerate localisation: widen (a superset stays valid)
        r_lo, r_hi = max(lo, r_lo - theta), min(hi, r_hi + theta)
    low, high, spent2, diag2, _ = cdf_interval(source.leaves((r_lo, r_hi), depth),
                                               3.0 * rho / 4.0, (r_lo, r_hi),
                                               3.0 * alpha / 4.0, depth, gen, envelope=True)
    diagnostics = {"stage1_interval": (l1, u1), "stage1": diag1, "stage2": diag2}
    return low, high, spent1 + spent2, diagnostics


CountsProvider = Callable[[tuple[float, float], int], ArrayLike]


def aggregation_depth(
    method: str, bounds: tuple[float, float], granularity: float | None = None
) -> int:
    """Tree depth D of the 2^D-bin histogram that :func:`confidence_interval_from_counts`
    needs for ``method`` at this granularity (the method's default if None)."""
    lo, hi = check_interval_bounds("bounds", bounds)
    _check_method(method)
    theta = (
        (hi - lo) * DEFAULT_GRANULARITY_FRACTION[method]
        if granularity is None
        else check_positive("granularity", granularity)
    )
    depth = grid_depth(hi - lo, theta)
    if depth > _MAX_DEPTH:
        raise InvalidParameterError(
            f"granularity={theta:g}: needs more than 2^{_MAX_DEPTH} bins; use a coarser one."
        )
    return depth


def confidence_interval_from_counts(
    counts: ArrayLike,
    rho: float,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    method: Method | str = "cdf",
    granularity: float | None = None,
    rng: RandomLike = None,
    *,
    refine: CountsProvider | None = None,
) -> MedianInterval:
    """DP median confidence interval from aggregated counts (the out-of-core path).

    Parameters
    ----------
    counts : array-like of shape (2^D,)
        Exact record counts of 2^D equal bins over ``bounds``, after clipping the data into
        ``bounds``: bin j = (g_j, g_{j+1}] with g_j = lo + j·|R|/2^D, bin 0 also holding lo
        (the layout of :func:`dpfair.mechanisms.leaf_counts`, which DuckDB reproduces in
        :func:`dpfair.data.histogram_counts`). The bin width w must not exceed the method's
        granularity.
    rho, bounds, alpha, method, granularity, rng
        As in :func:`confidence_interval`; ``granularity`` defaults to the same fractions
        of |R|, and for ``"cdf"``, ``"binsearch"`` and ``"binsearch_cdf"`` it must equal
        the grid the counts were computed on (2^D bins, the smallest D with w ≤ θ).
    refine : callable(bounds, depth) -> counts, optional
        A second aggregation on a sub-range, needed by ``"binsearch_cdf"``: the leaf counts
        of *all* records clipped into ``bounds`` (2^depth non-negative integers summing to
        the same n as ``counts``; anything else raises :class:`~dpfair.InvalidDataError`).

    Returns
    -------
    MedianInterval

    Notes
    -----
    ``"cdf"``, ``"binsearch"`` and ``"binsearch_cdf"`` only ever read counts at the grid,
    so they are *identical* (same output for the same seed) to :func:`confidence_interval`
    on the raw data. ``"expmech"`` needs order statistics, which a histogram only gives up
    to the bin: every record is replaced by the upper edge u(x) of its bin and ExpMech runs
    on those values (exactly, in O(#bins) memory). Privacy is unchanged (u is applied per
    record, so neighbouring data stay neighbours). Coverage: u is monotone, so u(med) is a
    median of u(X), and the interval covers it with probability ≥ 1 − α (with atoms, see
    :func:`confidence_interval`); since med ∈ [u(med) − w, u(med)], the released lower end
    is moved down by w.
    """
    r, a, (lo, hi) = _check_request(rho, alpha, bounds, method)
    arr = _check_counts("counts", counts)
    depth = round(math.log2(arr.size))
    width = (hi - lo) / arr.size
    if granularity is None:
        theta = max(width, (hi - lo) * DEFAULT_GRANULARITY_FRACTION[method])
    else:
        theta = check_positive("granularity", granularity)
    if method != "expmech" and grid_depth(hi - lo, theta) != depth:
        raise InvalidParameterError(
            f"granularity={theta:g}: the tree-based methods need counts on 2^"
            f"{grid_depth(hi - lo, theta)} bins for this granularity, got 2^{depth} bins. "
            "Aggregate on that grid or pass the matching granularity."
        )
    if method == "expmech" and not width <= theta * (1 + 1e-12):
        raise InvalidParameterError(
            f"granularity={theta:g}: smaller than the bin width {width:g}; aggregate on a "
            "finer grid or use a coarser granularity."
        )
    if theta > (hi - lo) / 4.0:
        raise InvalidParameterError(
            f"granularity={theta:g}: must be at most a quarter of the range width."
        )
    source = _CountsSource(arr, (lo, hi), refine)
    if source.n < 1:
        raise InvalidDataError("counts: all bins are empty; there is no data.")
    nonprivate_ranks(source.n, a)
    extra = {"aggregated": True, "bins": int(arr.size)}
    return _run(source, r, (lo, hi), a, str(method), theta, as_generator(rng), extra)

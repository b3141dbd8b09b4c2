"""Public entry points of :mod:`dpfair.quantiles`."""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._advice import little_privacy, on_public_bound
from dpfair._errors import InvalidParameterError
from dpfair._lazy import LazyModule
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_finite_1d, check_in_open_interval, check_not_masked
from dpfair._warnings import FreeWarning
from dpfair.mechanisms import (
    ExponentialMechanism,
    GaussianMechanism,
    NoisyBinaryTree,
    leaf_counts_sorted,
    leaf_edges,
)
from dpfair.median._api import (
    _check_request,
    _theta,
)
from dpfair.median._binomial import binom_cdf, binom_sf
from dpfair.median._binsearch import grid_depth
from dpfair.median._result import DPCdf
from dpfair.privacy import Accountant, Budget
from dpfair.quantiles._methods import (
    _query_noise,
    binsearch_quantile,
    binsearch_quantiles,
    binsearch_targets,
    cdf_quantiles,
    expmech_lower_targets_exact,
    expmech_quantile,
    grid_point,
    grid_points,
)
from dpfair.quantiles._result import CdfBand, QuantileInterval, QuantileIntervals
from dpfair.quantiles._segments import (
    SegmentLayout,
    allocate_depths,
    cumulative_from_histogram,
    leaves_from_cumulative,
    merge_ranges,
)

# scipy loads on first use: a first call pays only for what it runs (issue 22, item 8)
optimize: Any = LazyModule("scipy.optimize")
special: Any = LazyModule("scipy.special")

__all__ = [
    "LOCALIZE_ALPHA_FRACTION",
    "LOCALIZE_RHO_FRACTION",
    "QUERY_METHODS",
    "QuantileWarning",
    "cdf_band",
    "check_request",
    "confidence_interval",
    "confidence_intervals",
    "confidence_intervals_from_queries",
    "file_queries",
    "nonprivate_interval",
    "nonprivate_ranks",
]

#: Share of ρ and of α spent by the private localisation stage (public constants).
LOCALIZE_RHO_FRACTION: Final[float] = 0.1
LOCALIZE_ALPHA_FRACTION: Final[float] = 0.05
#: The smaller α share used when every stage-1 target rank is at least
#: :data:`LOCALIZE_MARGIN_SDS` stage-1 noise sds away from ranks 0 and n
#: (:func:`localization_alpha_fraction`).
LOCALIZE_ALPHA_FRACTION_INNER: Final[float] = 0.01
LOCALIZE_MARGIN_SDS: Final[float] = 4.0
#: Tree depth when no stage-1 end has a valid rank (tiny n): R₂ is the public range, the
#: rank-based width model has nothing to measure, and the former fixed depth is kept.
NO_INFO_TREE_DEPTH: Final[int] = 7
#: Depth of the localised NoisyBinSearch (2^7 bins over the localised range).
LOCALIZED_SEARCH_DEPTH: Final[int] = 7
#: Share of ρ spent by the localised ExpMech's split search (:func:`centre_search`).
EXPMECH_SPLIT_RHO_FRACTION: Final[float] = 0.05
#: K_E of the localised ExpMech when a stage-1 end has no valid rank (tiny n; public): R₂
#: then reaches a public bound and holds an unknown stretch of empty range, so the rank
#: model of :func:`localized_expmech_steps` has nothing to measure. 128 cells (C = 64): at
#: n = 50 narrower than the former unpadded design at q = 0.1, 0.5 and 0.9 (measured;
#: 256 cells lose at q = 0.5, the model's 38–45 at q = 0.1).
NO_INFO_EXPMECH_STEPS: Final[int] = 128
#: Ablation switches of the localised ExpMech, for ``benchmarks/quantile_widths.py
#: --expmech-variant`` only (empty: the design documented in :func:`_localized`):
#: ``split`` (False: both ends on R₂, no split search), ``padded`` (False: the unpadded
#: cell mechanism, C = K_E, valid for a power-of-two K_E) and ``steps`` (a fixed K_E).
_EXPMECH_VARIANT: dict[str, Any] = {}


def _r(budget: Budget) -> float:
    """The zCDP ρ of a budget (every release here is zCDP)."""
    return float(budget.rho or 0.0)


class QuantileWarning(FreeWarning):
    """A free (post-processing) warning about a released quantile interval.

    A :class:`~dpfair._warnings.FreeWarning` (so the command line prints it as one
    ``dpfair: warning:`` line); the texts of the first two kinds come from
    :mod:`dpfair._advice`, shared with the median.
    """


# ---------------------------------------------------------------------------- non-private
def nonprivate_ranks(n: int, q: float, alpha: float) -> tuple[int | None, int | None]:
    """Exact ranks (1-based) of the classical interval [x_(kL), x_(kU)] for the q-quantile.

    kL is the largest k with P(B ≤ k − 1) ≤ α/2, B ~ Bin(n, q) (= P(x_q < x_(k)) for a
    continuous population); kU the smallest k with P(B ≥ k) ≤ α/2. ``None`` for an end
    that no order statistic achieves (the interval is then open on that side).
    """
    half = alpha / 2.0
    ks = np.arange(0, n + 1)
    cdf = binom_cdf(ks - 1, n, q)  # P(B ≤ k − 1), k = 0..n (dpfair.median._binomial)
    ok = np.flatnonzero((cdf <= half * (1 - 1e-12)) & (ks >= 1))
    k_low = int(ks[ok[-1]]) if ok.size else None
    sf = binom_sf(ks - 1, n, q)  # P(B ≥ k)
    ok = np.flatnonzero((sf <= half * (1 - 1e-12)) & (ks >= 1))
    k_high = int(ks[ok[0]]) if ok.size else None
    return k_low, k_high


def nonprivate_interval(x: ArrayLike, q: float, alpha: float = 0.05) -> tuple[float, float]:
    """The classical distribution-free (1 − α) interval for the q-quantile (NOT private).

    Returns (low, high); an end that no order statistic achieves at this α is ∓inf.
    A reference for relative widths, never a release.
    """
    qq = check_in_open_interval("q", q, 0.0, 1.0)
    a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
    arr = np.sort(check_finite_1d("x", x))
    k_low, k_high = nonprivate_ranks(arr.size, qq, a)
    return (float(arr[k_low - 1]) if k_low else -math.inf,
            float(arr[k_high - 1]) if k_high else math.inf)


# ---------------------------------------------------------------------------- helpers
def _check_levels(qs: Any) -> list[float]:
    try:
        values = [float(v) for v in np.atleast_1d(np.asarray(qs, dtype=np.float64))]
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"qs={qs!r}: expected a sequence of quantile levels in (0, 1), e.g. [0.25, 0.5, 0.75]."
        ) from None
    if not values:
        raise InvalidParameterError("qs: at least one quantile level is needed.")
    return [check_in_open_interval("q", v, 0.0, 1.0) for v in values]




def localization_depth(n: int, bounds: tuple[float, float]) -> int:
    """Depth D₁ of the localisation search: ⌈log₂ n⌉ + 8, within [12, 40] (public).

    Capped further so that the 2^D₁ grid steps stay above 2^-44 of the bounds' magnitude
    (distinct binary64 grid points). The cap stops at depth 1: for bounds narrower than
    2^-43 of their magnitude even that step is below 2^-44·scale, and
    :func:`localization_regular` is False (the localisation is then not run).
    """
    lo, hi = bounds
    depth = min(40, max(12, math.ceil(math.log2(max(n, 2))) + 8))
    scale = max(abs(lo), abs(hi), hi - lo)
    while depth > 1 and (hi - lo) / 2.0**depth < scale * 2.0**-44:
        depth -= 1
    return depth


#: Smallest stage-1 step, relative to the bounds' magnitude max(|lo|, |hi|, hi − lo), for
#: which the localisation is *regular* (:func:`localization_regular`).
LOCALIZE_MIN_RELATIVE_STEP: Final[float] = 2.0**-44


def localization_regular(n: int, bounds: tuple[float, float]) -> bool:
    r"""Whether the localisation stage can run on these public bounds (public, no data).

    A function of (n, R) only. The stage-2 ranges R₂ are built from stage-1 grid points
    g_j = lo + j·s₁ (s₁ = |R|/2^{D₁}, :func:`localization_depth`) and, for a zero-width
    bracket, one step s₁ of widening. Every argument about R₂ (a positive width ≥ s₁/2,
    distinct grid points, a widening that moves) needs s₁ ≥ 2^-44·scale, scale =
    max(|lo|, |hi|, |R|): then s₁ exceeds 2^8 ulps of any point of R, so fl(g + s₁) ≠ g.
    :func:`localization_depth` meets that by lowering D₁, except when even D₁ = 1 fails,
    i.e. |R| < 2^-43·scale (bounds a few thousand ulps wide or narrower, e.g.
    (1, nextafter(1, 2))): there the stage-1 midpoint can round back onto a bound and R₂
    collapse to a single point. For such bounds :func:`_release` runs the public-range
    (non-localised) method instead — a choice made from public values before any data
    are read, which spends nothing and keeps every guarantee of that method (recorded
    as ``diagnostics["localize_skipped"]``).
    """
    lo, hi = bounds
    scale = max(abs(lo), abs(hi), hi - lo)
    step = (hi - lo) / 2.0 ** localization_depth(n, bounds)
    return step > 0.0 and step >= scale * LOCALIZE_MIN_RELATIVE_STEP


#: Smallest stage-1 step for which the localised ExpMech grid is *regular*
#: (:func:`localized_expmech_regular`): every width involved is a normal binary64 number.
REGULAR_STEP: Final[float] = 2.0**-1000


def localized_expmech_regular(n: int, bounds: tuple[float, float]) -> bool:
    r"""Whether every range R₂ the localisation can output gives a regular ExpMech grid.

    A public function of (n, R). With s₁ = |R|/2^{D₁} the stage-1 step, every R₂ has
    width w = fl(U − L) ≥ s₁/2 (distinct stage-1 grid points, or one step of widening,
    are ≥ s₁(1 − 2^-7) apart because s₁ ≥ 2^-44·scale, :func:`localization_depth`), and
    a split sub-range is used only if its width is ≥ s₁/2 too (:func:`expmech_split`).
    If s₁ ≥ :data:`REGULAR_STEP` = 2^-1000, every such width w ≥ 2^-1001, so with
    K_E ≤ 2^11 (:data:`EXPMECH_STEPS`) θ₂ = fl(w/K_E) ≥ 2^-1013 is a normal number with
    relative error ≤ u = 2^-53, and every cell θ_g = θ₂·2^p/Q (Q ≤ 64 a power of two,
    2^p ≥ 1 the coarsening) is ≥ 2^-1019, normal, and exact. The grid has
    M = max(1, ⌈fl(w/θ_g)⌉) cells with w/θ_g = K_E·Q·2^-p/(1 + δ), |δ| ≤ u, so
    fl(w/θ_g) ≤ K_E·Q·2^-p·(1 + 3u) < K_E·Q·2^-p + 1 and M ≤ K_E·Q·2^-p + 2. The padded
    mechanism's constant is then (M − 1)/(2Q + 1) ≤ (K_E·Q·2^-p + 1)/(2Q + 1) < K_E/2
    (for p = 0 this is 2 < K_E; for p ≥ 1, where Q = 1, it is 2K_E/2^p + 2 < 3K_E) for
    EVERY range, coarsened or not, and for every K_E ≥ 3, a power of two or not: the
    public C = K_E/2 of the target ranks bounds it. Below that step (public bounds within
    ~2^-990 of zero width, subnormal arithmetic) the rounding of θ₂ can leave many more
    cells (e.g. R₂ = [0, 12223·2^-1074] with K_E = 128: an unpadded constant ≈ 187), so the
    localised ExpMech is not used there (:func:`_release` runs the public-range method).
    The premise s₁ ≥ 2^-44·scale is :func:`localization_regular`, required here too (it
    fails for bounds narrower than 2^-43 of their magnitude, where R₂ can collapse to a
    point and θ₂ to 0).
    """
    lo, hi = bounds
    return (localization_regular(n, bounds)
            and (hi - lo) / 2.0 ** localization_depth(n, bounds) >= REGULAR_STEP)


def _clip_sorted(x: NDArray[np.float64], bounds: tuple[float, float],
                 out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """``np.clip(x, lo, hi)`` for sorted ``x``, by two binary searches and block fills.

    The values below lo form a prefix and those above hi a suffix of sorted data, so the
    result equals ``np.clip`` element for element at the cost of a copy (``out=x``: in
    place) instead of per-element comparisons.
    """
    lo, hi = bounds
    i = int(np.searchsorted(x, lo, side="left"))
    j = int(np.searchsorted(x, hi, side="right"))
    if out is None:
        out = np.empty_like(x)
        out[i:j] = x[i:j]
    elif out is not x:
        out[i:j] = x[i:j]
    out[:i] = lo
    out[j:] = hi
    return out


class _ClippedView:
    """Sorted data read as if clipped into a sub-range, without the O(n) clipped copy.

    ExpMech reads only order statistics in windows around its target ranks
    (``x[idx]``), so clipping what is read gives exactly what the clipped copy would
    hold there; anything that needs the whole array (``np.asarray``) gets that copy.
    """

    def __init__(self, x_sorted: NDArray[np.float64], bounds: tuple[float, float]) -> None:
        self._x = x_sorted
        self._bounds = (float(bounds[0]), float(bounds[1]))
        self.size = int(x_sorted.size)
        self.shape = x_sorted.shape
        self.ndim = 1
        self.dtype = x_sorted.dtype

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx: Any) -> Any:
        return np.clip(self._x[idx], self._bounds[0], self._bounds[1])

    def __array__(self, dtype: Any = None, copy: Any = None) -> NDArray[np.float64]:
        out = _clip_sorted(self._x, self._bounds)
        return out if dtype is None else out.astype(dtype)


class _Sorted:
    """Clipped, sorted data with the count queries every method needs."""

    def __init__(self, x_sorted: NDArray[np.float64]) -> None:
        self.x = x_sorted
        self.n = int(x_sorted.size)

    def clipped(self, bounds: tuple[float, float]) -> NDArray[np.float64]:
        return _clip_sorted(self.x, bounds)  # stays sorted

    def clipped_view(self, bounds: tuple[float, float]) -> NDArray[np.float64]:
        """:meth:`clipped` as a read-through view (for ExpMech's windowed reads)."""
        return cast("NDArray[np.float64]", _ClippedView(self.x, bounds))

    def count_at(self, bounds: tuple[float, float], depth: int) -> Any:
        """j ↦ #{clip(x, bounds) ≤ g_j}, read off the (wider-clipped) sorted data.

        For lo ≤ g < hi, clip(x) ≤ g ⇔ x ≤ g (a record below lo is counted either way,
        one above hi never), and for g ≥ hi every clipped record counts: so a sub-range
        needs no clipped copy.
        """
        memo: dict[int, int] = {}  # searches for several q (and both ends) share steps

        def count(j: int) -> int:
            if j in memo:
                return memo[j]
            if j >= 1 << depth:
                return self.n
            g = grid_point(bounds, depth, j)
            c = self.n if g >= bounds[1] else int(self.x.searchsorted(g, side="right"))
            memo[j] = c
            return c
        return count

    def count_many(self, bounds: tuple[float, float], depth: int) -> Any:
        """:meth:`count_at` for an array of interior grid indices (one ``searchsorted``)."""
        # Grid points are non-decreasing in j (each rounding step is monotone), so when
        # the last interior one is below hi no point needs count_at's "g ≥ hi → n".
        top = (1 << depth) - 1
        clamp = top > 0 and grid_point(bounds, depth, top) >= bounds[1]

        def count(js: NDArray[np.int64]) -> NDArray[np.int64]:
            g = grid_points(bounds, depth, js)
            c = self.x.searchsorted(g, side="right")
            if clamp:
                c[g >= bounds[1]] = self.n
            return c
        return count

    def leaves(self, bounds: tuple[float, float], depth: int) -> NDArray[np.int64]:
        # = leaf_counts(self.clipped(bounds), bounds, depth), without the clipped copy
        return leaf_counts_sorted(self.x, bounds, depth, check=False)

    def segment_leaves(self, layout: SegmentLayout) -> NDArray[np.int64]:
        """The 2^D leaf counts of ``layout`` (:mod:`dpfair.quantiles._segments`): one
        binary search per inner point, #{x ≤ g}, n at or past the hull's upper end."""
        g = layout.inner_points()
        cum = self.x.searchsorted(g, side="right").astype(np.int64)
        cum[g >= layout.hull[1]] = self.n
        return leaves_from_cumulative(cum, self.n, layout.depth)


def _prepare(x: ArrayLike, bounds: tuple[float, float]) -> _Sorted:
    """Validated, sorted, clipped copy of ``x``.

    Finiteness is checked after the sort, in O(1): −inf sorts first, +inf and NaN last.
    Any failure (or an unusual input) re-runs :func:`check_finite_1d` on the caller's
    ``x``, which raises the usual error naming the first bad index.
    """
    check_not_masked("x", x)
    try:
        data = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        data = check_finite_1d("x", x)
    if data.ndim != 1 or data.size < 1:
        data = check_finite_1d("x", x)  # raises, or squeezes to 1-D
    data.sort()
    if not (math.isfinite(data[0]) and math.isfinite(data[-1])):
        check_finite_1d("x", x)  # raises with the first bad index
    return _Sorted(_clip_sorted(data, bounds, out=data))  # sort then clip = clip then sort


# ---------------------------------------------------------------------------- engine
def localization_alpha_fraction(n: int, ps: Sequence[float], rho1: float, depth: int,
                                alpha: float) -> float:
    """Share of α given to the localisation stage: a public function of (n, q, ρ₁, D₁, α).

    The final interval's noise quantile is taken at level α − α₁, so α₁ should be small;
    but a stage-1 end whose target rank lies within a few noise sds σ₁ of rank 0 (or n)
    can stop anywhere in the empty stretch between the public bound and the data (counts
    there are all 0, so the search follows the noise), which widens R₂ and every bin of
    the second stage. So the share is :data:`LOCALIZE_ALPHA_FRACTION_INNER` when, at that
    share, every stage-1 target rank is at least :data:`LOCALIZE_MARGIN_SDS`·σ₁ inside
    [0, n], and :data:`LOCALIZE_ALPHA_FRACTION` (a larger level, targets further inside)
    otherwise. Only public values enter, so the choice spends no privacy and the coverage
    argument of :func:`_localized` holds for either share.
    """
    k = len(ps)
    sigma = GaussianMechanism.for_zcdp(rho1 / k / (2.0 * depth), l2_sensitivity=1.0).sigma
    a1 = LOCALIZE_ALPHA_FRACTION_INNER * alpha / 2.0 / k
    margin = LOCALIZE_MARGIN_SDS * sigma
    for p in ps:
        k_low, k_high = binsearch_targets(n, sigma, depth, p, a1, a1)
        if k_low is None or k_high is None or k_low < margin or n - k_high < margin:
            return LOCALIZE_ALPHA_FRACTION
    return LOCALIZE_ALPHA_FRACTION_INNER


def _legacy(src: _Sorted, ps: list[float], rho: float, bounds: tuple[float, float],
            alpha: float, method: str, theta: float, gen: np.random.Generator
            ) -> tuple[list[tuple[float, float, dict[str, Any]]], Budget, DPCdf | None,
                       dict[str, Any]]:
    """The paper's methods on the public range, Bonferroni over the K quantiles."""
    k = len(ps)
    lo, hi = bounds
    a_end = alpha / 2.0 / k
    out: list[tuple[float, float, dict[str, Any]]] = []
    spent = Budget.zcdp(0.0)
    cdf: DPCdf | None = None
    extra: dict[str, Any] = {}
    if method == "expmech":
        for p in ps:
            low, high, s, d = expmech_quantile(src.x, p, rho / k, bounds, a_end, a_end, theta,
                                               gen)
            out.append((low, high, d))
            spent = spent + s
    elif method == "binsearch":
        depth = grid_depth(hi - lo, theta)
        for p in ps:
            low, high, s, d = binsearch_quantile(src.count_at(bounds, depth), src.n, p,
                                                 rho / k, bounds, depth, a_end, a_end, gen)
            out.append((low, high, d))
            spent = spent + s
    elif method == "cdf":
        depth = grid_depth(hi - lo, theta)
        ends, spent, d, cdf = cdf_quantiles(src.leaves(bounds, depth),
                                            [(p, a_end, a_end) for p in ps], rho, bounds,
                                            depth, gen)
        out = [(lw, hg, {"tree": d, "grid_indices": d["grid_indices"][i]})
               for i, (lw, hg) in enumerate(ends)]
    else:  # binsearch_cdf: ρ/4, α/4 to localise (each q), 3ρ/4, 3α/4 in one tree on the hull
        depth = grid_depth(hi - lo, theta)
        stage1: list[tuple[float, float, dict[str, Any]]] = []
        s1 = Budget.zcdp(0.0)
        for p in ps:
            l1, u1, s, d = binsearch_quantile(src.count_at(bounds, depth), src.n, p,
                                              rho / 4.0 / k, bounds, depth, a_end / 4.0,
                                              a_end / 4.0, gen)
            stage1.append((l1, u1, d))
            s1 = s1 + s
        if _r(s1) == 0.0:  # no stage-1 rank at all (public n, ρ, α): plain cdf instead
            out, spent, cdf, _ = _legacy(src, ps, rho, bounds, alpha, "cdf", theta, gen)
            return out, spent, cdf, {"stage1": "skipped: no valid rank; ran method='cdf'"}
        r_lo = min(min(l1, u1) for l1, u1, _ in stage1)
        r_hi = max(max(l1, u1) for l1, u1, _ in stage1)
        if r_hi - r_lo < theta:
            r_lo, r_hi = max(lo, r_lo - theta), min(hi, r_hi + theta)
        if not r_lo < r_hi:
            # θ below an ulp of the stage-1 ends (bounds narrow for their magnitude): the
            # widening rounded back to a point. Use the public range (a function of the
            # released stage-1 ends: the envelope test holds for any such range). Only
            # this case changes; it formerly raised "bounds=(r, r)" from here.
            r_lo, r_hi = lo, hi
        rest = rho - _r(s1)
        ends, s2, d2, cdf = cdf_quantiles(
            src.leaves((r_lo, r_hi), depth),
            [(p, 3.0 * a_end / 4.0, 3.0 * a_end / 4.0) for p in ps], 3.0 * rho / 4.0
            if rest >= 3.0 * rho / 4.0 else rest, (r_lo, r_hi), depth, gen, envelope=True)
        spent = s1 + s2
        out = [(lw, hg, {"stage1_interval": (st[0], st[1]), "stage1": st[2], "stage2": d2})
               for (lw, hg), st in zip(ends, stage1, strict=True)]
        extra = {"stage2_range": (r_lo, r_hi)}
    return out, spent, cdf, extra


def _localized(src: _Sorted, ps: list[float], rho: float, bounds: tuple[float, float],
               alpha: float, method: str, gen: np.random.Generator
               ) -> tuple[list[tuple[float, float, dict[str, Any]]], Budget, DPCdf | None,
                          dict[str, Any], list[float]]:
    r"""Private localisation (charged), then the method on the localised range(s).

    Stage 1, with ρ₁ = 0.1ρ and α₁ = f₁α, f₁ ∈ {1 %, 5 %} a public function of
    (n, q, ρ₁, D₁) (:func:`localization_alpha_fraction`), split over the K quantiles and
    two ends: NoisyBinSearch on R at depth D₁ (:func:`localization_depth`) for each q,
    giving R₂(q) = [L₁, U₁] (widened to at least one stage-1 step), which contains x_q
    except with probability α₁/K. Stage 2, with ρ₂ = ρ − ρ₁ and α₂ = α − α₁, runs on data
    clipped into R₂, with a grid set by |R₂| — the data's private scale — instead of |R|:

    * ExpMech (issue 22, item 4): a split search (ρ_c = 5 % of ρ, :func:`centre_search`)
      brackets the rank n·q on the stage-1 grid, [v_lo, v_hi]; the lower end's draw runs
      on [L₁, v_hi] and the upper end's on [v_lo, U₁] (:func:`expmech_split`, which proves
      that the top of the lower end's range and the bottom of the upper end's are free:
      no coverage statement depends on them), each with θ₂ = |range|/K_E, on the PADDED
      cell mechanism (Q extra output cells beyond each end of the grid, so the score-0
      band never loses its lower or upper θ: tail constant (M − 1)/(2Q + 1), about half
      the unpadded one). K_E is the minimiser of a public width model
      (:func:`localized_expmech_steps`: the target ranks' spread against the grid shift
      W/K_E, W from the stage-1 target ranks), or :data:`NO_INFO_EXPMECH_STEPS` when a
      stage-1 end has no rank; the grid's constant is below K_E/2 for
      *every* range whenever the public (n, R) pass :func:`localized_expmech_regular`
      (proof there; otherwise the public-range ExpMech runs instead, a public choice), and
      the target ranks use C = K_E/2 exactly (never max(K_E/2, C_grid), which would depend
      on the range): they do not depend on the data, so the conditional argument of
      :mod:`dpfair.median._expmech` holds as is (P(fail) ≤ E[h(B)] with h the same bound
      for every range). The ranks use the exact worst-case conditional law of the draw,
      h(t) = x_t/(1 + x_t), x_t = C e^{−εt/2}
      (:func:`dpfair.quantiles._methods.expmech_lower_failure_exact`: the band's mass is
      in the normaliser, so the miss probability given a rank error t is at most
      N/(N + band) with N ≤ C·band·e^{−εt/2}; attained by a clump), instead of
      min(1, x_t). The worst-case constant no longer scales with |R|/θ.
    * BinSearch: 2^7 bins over R₂; its target ranks depend only on (n, σ, D), public.
    * cdf / binsearch_cdf: one tree (for K ≥ 2 its leaves laid out as one dyadic grid per
      merged R₂(q), :func:`localized_segment_layout`; for K = 1 over R₂), tested with the envelope
      thresholds of :mod:`dpfair.median._cdf` (valid for a data-chosen range: the test
      at the grid point x* next to x_q rejects with probability ≤ q_env(B⁻) given the
      data and stage 1, B⁻ = #{x_i < x_q} ≥ c(x*) whatever R₂ is, and E q_env(B⁻) ≤
      E q_env(Bin(n, q)) = level). Its depth D₂ is fixed by public values only
      (:func:`localized_tree_depth`, a width model), never by the data.

    Coverage: P(x_q ∉ CI) ≤ P(x_q ∉ R₂) + P(x_q ∈ R₂, stage 2 misses) ≤ (α₁ + α₂)/K
    (for ExpMech end by end: P(L > x_q) ≤ P(L₁ > x_q) + E h(B − k_L), see
    :func:`expmech_split`),
    and Bonferroni over K. The stage-2 bounds hold conditionally on stage 1's output
    (its noise is fresh and its target ranks, grid sizes and depth are public), for every
    R₂, so they hold unconditionally. Privacy: ρ₁ (+ ρ_c for ExpMech) + ρ₂ = ρ (zCDP
    composition; the accountant is a filter); every public choice above (f₁, D₂, K_E, the
    ranks) is computed before any data are read and spends nothing. A stage-1 end with no
    valid rank is the public bound: it spends nothing and never misses (x_q ∈ R), so its α₁
    is added to the second stage of that level (half per end; the union bound above is
    unchanged). When
    no stage-1 end has a rank at all (tiny n), the tree keeps the former fixed depth
    :data:`NO_INFO_TREE_DEPTH`.
    """
    k = len(ps)
    lo, hi = bounds
    rho1 = LOCALIZE_RHO_FRACTION * rho
    d1 = localization_depth(src.n, bounds)
    frac1 = localization_alpha_fraction(src.n, ps, rho1, d1, alpha)
    a1 = frac1 * alpha / 2.0 / k
    a2 = (1.0 - frac1) * alpha / 2.0 / k
    step1 = (hi - lo) / 2.0**d1
    acct = Accountant(Budget.zcdp(rho))
    ranges: list[tuple[float, float]] = []
    stage1: list[dict[str, Any]] = []
    count1 = src.count_at(bounds, d1)  # one (memoised) count function for every q
    # Every q's search in lockstep: the same draws, in the same order, as one
    # binsearch_quantile per q (binsearch_quantiles), one vectorised count per step.
    found1 = binsearch_quantiles(count1, src.count_many(bounds, d1), src.n,
                                 [(p, a1, a1) for p in ps], rho1 / k, bounds, d1, gen)
    for l1, u1, s, d in found1:
        if _r(s) > 0:
            acct.charge(s, label="localize")
        r_lo, r_hi = min(l1, u1), max(l1, u1)
        if r_hi - r_lo < step1:
            r_lo, r_hi = max(lo, r_lo - step1), min(hi, r_hi + step1)
        ranges.append((r_lo, r_hi))
        stage1.append({"interval": (l1, u1), "depth": d1, "target_ranks": d["target_ranks"],
                       "rho": _r(s)})
    rho2 = rho - (_r(acct.spent) if acct.records else 0.0)  # an unspent stage-1 end passes on
    # A stage-1 end with no valid rank (public) is the public bound, which never misses:
    # its α₁ passes on to the second stage, half to each end of that level's interval.
    a2s = [a2 + a1 * sum(t is None for t in st["target_ranks"]) / 2.0 for st in stage1]
    out: list[tuple[float, float, dict[str, Any]]] = []
    cdf: DPCdf | None = None
    thetas: list[float] = []
    extra: dict[str, Any] = {"localize": {"rho": rho1, "alpha": frac1 * alpha, "depth": d1}}
    if method == "expmech":
        rho_c = EXPMECH_SPLIT_RHO_FRACTION * rho
        split = bool(_EXPMECH_VARIANT.get("split", True))
        padded = bool(_EXPMECH_VARIANT.get("padded", True))
        fixed_steps = _EXPMECH_VARIANT.get("steps")
        centres: list[tuple[float, float] | None] = []
        for p, st in zip(ps, stage1, strict=True):
            if not split or None in st["target_ranks"]:  # public: no split without both ends
                centres.append(None)
                continue
            bracket, sc = centre_search(count1, src.n, round(src.n * p), rho_c / k, bounds, d1,
                                        gen)
            acct.charge(sc, label="localize/split")
            centres.append(bracket)
        rho2 = rho - _r(acct.spent)
        eps2 = ExponentialMechanism.for_zcdp(rho2 / k / 2.0).epsilon
        for p, r2, st, a2q, v in zip(ps, ranges, stage1, a2s, centres, strict=True):
            k_l1, k_u1 = st["target_ranks"]
            if fixed_steps:
                steps = int(fixed_steps)
            elif k_l1 is None or k_u1 is None:  # public: R₂ reaches a public bound
                steps = NO_INFO_EXPMECH_STEPS
            else:
                width_ranks = float(k_u1 - k_l1) * (1.0 if v is not None else 2.0)
                steps = localized_expmech_steps(src.n, p, eps2, a2q, width_ranks)
            r_low, r_high = expmech_split(r2, v, step1 / 2.0)
            t_low = (r_low[1] - r_low[0]) / steps
            t_high = (r_high[1] - r_high[0]) / steps
            low, high, s, d = expmech_quantile(
                src.clipped_view(r_low), p, rho2 / k, r_low, a2q, a2q, t_low, gen,
                tail_constant=steps / 2.0 if padded else float(steps), exact_tail=True,
                padded=padded,
                upper=(src.clipped_view(r_high), r_high, t_high))
            theta2 = max(t_low, t_high)
            if _r(s) > 0:
                acct.charge(s, label="expmech")
            out.append((low, high, {"stage1": st, "range": r2, "ranges": (r_low, r_high),
                                    "split": v, "steps": steps, **d}))
            thetas.append(theta2)
    elif method == "binsearch":
        for p, r2, st, a2q in zip(ps, ranges, stage1, a2s, strict=True):
            depth = LOCALIZED_SEARCH_DEPTH
            low, high, s, d = binsearch_quantile(
                src.count_at(r2, depth), src.n, p, rho2 / k, r2, depth,
                a2q, a2q, gen)
            if _r(s) > 0:
                acct.charge(s, label="binsearch")
            out.append((low, high, {"stage1": st, "range": r2, **d}))
            thetas.append((r2[1] - r2[0]) / 2.0**depth)
    else:
        hull = (min(r[0] for r in ranges), max(r[1] for r in ranges))
        ranks1 = [st["target_ranks"] for st in stage1]
        specs2 = [(p, a2q, a2q) for p, a2q in zip(ps, a2s, strict=True)]
        if all(t is None for r in ranks1 for t in r):  # stage 1 found nothing: R₂ = R
            depth = NO_INFO_TREE_DEPTH + max(0, math.ceil(math.log2(k)))
            layout = None
        elif k == 1 or any(t is None for r in ranks1 for t in r):
            # One level, or a level whose stage-1 end has no rank (public: n, q, ρ₁, α₁):
            # its range reaches a public bound, and where its data sit inside that stretch
            # is unknown, so no rank-based allocation can size its bins (the per-range
            # layout was up to 6x wider at n = 50 000, q = 0.001; the hull's uniform grid
            # up to 6x wider at n·q = 20): the former layout, one grid over the hull.
            depth = localized_tree_depth(src.n, ps, rho2, min(a2s), ranks1)
            layout = None
        else:  # one dyadic grid per stage-1 range (public given stage 1)
            layout = localized_segment_layout(src.n, ps, rho2, min(a2s), ranges, ranks1)
            depth = layout.depth
        extra["localize"]["tree_depth"] = depth
        if layout is None:
            ends, s, d, cdf = cdf_quantiles(src.leaves(hull, depth), specs2, rho2, hull,
                                            depth, gen, envelope=True)
            segs = [hull] * k
            thetas = [(hull[1] - hull[0]) / 2.0**depth] * k
        else:
            ends, s, d, cdf = cdf_quantiles(src.segment_leaves(layout), specs2, rho2, hull,
                                            depth, gen, envelope=True, edges=layout.edges())
            segs = [layout.segments[m][:2] for m in layout.of_quantile]
            thetas = [layout.bin_width(i) for i in range(k)]
            extra["localize"]["segments"] = [list(sg) for sg in layout.segments]
        acct.charge(s, label="cdf/tree")
        out = [(lw, hg, {"stage1": st, "range": hull, "segment": sg, "tree": d})
               for (lw, hg), st, sg in zip(ends, stage1, segs, strict=True)]
    return out, acct.spent, cdf, extra, thetas


def centre_search(count_at: Callable[[int], int], n: int, target: int, rho_c: float,
                  bounds: tuple[float, float], depth: int, gen: np.random.Generator
                  ) -> tuple[tuple[float, float], Budget]:
    """The split search of the localised ExpMech: ((g_j, g_{j+1}), privacy spent).

    NoisyBinSearch for the rank ``target`` on the stage-1 grid (depth ``depth`` over
    ``bounds``): ``depth`` count queries #{x ≤ g}, each with the median's exact discrete
    Gaussian noise at ρ_c/depth-zCDP (sensitivity 1), so ρ_c in total; the result is the
    final bracket [g_lo, g_lo+1] (a post-processing of the noisy counts). It only
    places the split of :func:`expmech_split`; no coverage statement depends on it.
    """
    mech = GaussianMechanism.for_zcdp(rho_c / depth, l2_sensitivity=1.0)
    z = _query_noise(n, mech.sigma).sample(depth, gen)
    lo, hi = 0, 1 << depth
    for step in range(depth):
        mid = (lo + hi) // 2
        if float(count_at(mid)) + float(z[step]) <= target:
            lo = mid
        else:
            hi = mid
    total = 0.0
    for _ in range(depth):  # sequential composition, in query order
        total += float(mech.privacy.rho or 0.0)
    return (grid_point(bounds, depth, lo), grid_point(bounds, depth, hi)), Budget.zcdp(total)


def expmech_split(r2: tuple[float, float], centre: tuple[float, float] | None,
                  min_width: float) -> tuple[tuple[float, float], tuple[float, float]]:
    r"""(lower end's range, upper end's range) of the localised ExpMech.

    With R₂ = [L₁, U₁] and the split bracket [v_lo, v_hi] of :func:`centre_search`, the
    lower end's draw runs on [L₁, min(U₁, v_hi)] and the upper end's on
    [max(L₁, v_lo), U₁]; a sub-range narrower than ``min_width`` (half a stage-1 step, so
    that the grid stays regular, :func:`localized_expmech_regular`) or a missing bracket
    gives R₂ itself. A function of released values only (post-processing).

    Why any split is valid: the lower end L fails iff L > x_q. The draw runs on the data
    clipped into [L₁, b'] and L is clipped into [L₁, b'] as well. If x_q ≥ b', L ≤ b' ≤ x_q
    never fails; if L₁ ≤ x_q < b', clipping keeps every x_i ≤ x_q at or below x_q and every
    x_i > x_q above it, so B = #{x_i ≤ x_q} is unchanged and the conditional argument of
    :mod:`dpfair.median._expmech` applies as is; if x_q < L₁ the end may fail, which is the
    stage-1 event P(L₁ > x_q) ≤ α₁/2 already in the union bound. The top b' of the lower
    end's range is therefore free: it only has to lie above the rank-k_L draw for the
    interval to be narrow (v_hi is at rank ≈ n·q, ~40 ranks above k_L at the paper
    setting), and it shrinks the range, hence θ₂ = |range|/K_E, to about half. The upper
    end is the mirror image (its range's bottom a' is free, its top U₁ must be ≥ x_q).
    """
    lo, hi = r2
    if centre is None:
        return r2, r2
    v_lo, v_hi = centre
    top = min(hi, v_hi)
    bottom = max(lo, v_lo)
    low_range = (lo, top) if top - lo >= min_width else r2
    high_range = (bottom, hi) if hi - bottom >= min_width else r2
    return low_range, high_range


#: Candidate numbers of steps K_E of the localised ExpMech grid (public): 2^(i/4), 16..2048.
EXPMECH_STEPS: Final[tuple[int, ...]] = tuple(sorted({round(2.0 ** (i / 4.0))
                                                        for i in range(16, 45)}))


@functools.lru_cache(maxsize=256)
def localized_expmech_steps(n: int, p: float, epsilon: float, alpha_end: float,
                            width_ranks: float) -> int:
    r"""K_E of the localised ExpMech for level p: the minimiser of a public width model.

    The released ends sit, in ranks, about (n·p − k_L) + (k_U − n·p) apart (the target
    ranks, which use the tail constant C = K_E/2 and so move outward as K_E grows, by
    about 2 ln(C)/ε each) plus the grid shift of each end, θ₂ = |range|/K_E, i.e. about
    W/K_E ranks for a range that holds W ranks. So K_E minimises
    (k_U − k_L) + ``width_ranks``/K_E over :data:`EXPMECH_STEPS`, where ``width_ranks``
    (both ends' W) comes from the stage-1 and split target ranks — public values. The
    choice spends no privacy and the coverage argument holds for every fixed K_E.
    """
    best, best_cost = EXPMECH_STEPS[0], math.inf
    centre = n * p
    # every candidate's exact-law ranks at once (expmech_targets(..., exact=True) for each
    # C = K_E/2: the same ranks, by expmech_lower_targets_exact's certified search)
    cs = tuple(steps / 2.0 for steps in EXPMECH_STEPS)
    lows = expmech_lower_targets_exact(n, epsilon, cs, alpha_end, p)
    mirrors = expmech_lower_targets_exact(n, epsilon, cs, alpha_end, 1.0 - p)
    for steps, k_l, k_m in zip(EXPMECH_STEPS, lows, mirrors, strict=True):
        k_low = k_l if k_l >= 0 else None
        k_high = n - k_m if k_m >= 0 else None
        # an end without a rank is the public bound whatever K_E is: it adds a constant
        cost = sum(abs(k - centre) + width_ranks / 2.0 / steps
                   for k in (k_low, k_high) if k is not None)
        if cost < best_cost:
            best, best_cost = steps, cost
    return best


#: Depths the localised tree chooses from (public).
TREE_DEPTHS: Final[tuple[int, ...]] = tuple(range(3, 13))


@functools.lru_cache(maxsize=256)
def _tree_end_excess(n: int, p: float, depth: int, rho: float, level: float
                     ) -> tuple[float, float]:
    """(threshold − n·p in ranks, rms prefix sd) of one envelope test at ``level`` (public).

    For the width model only: the envelope threshold's normal approximation
    z·sqrt(n·p(1 − p) + σ⁺_max²) + shift (the released test uses the exact threshold).
    """
    z, sig_plus_max, shift_max, rms = _tree_noise_summary(depth, rho, level)
    excess = z * math.sqrt(n * p * (1.0 - p) + sig_plus_max ** 2)
    return excess + shift_max, rms


@functools.lru_cache(maxsize=256)
def _tree_noise_summary(depth: int, rho: float, level: float
                        ) -> tuple[float, float, float, float]:
    """(z, max σ⁺, max shift, rms prefix sd) of the tree at (depth, ρ): n plays no part.

    The n-free part of :func:`_tree_end_excess`, cached on its own so that a new n
    (a new sample size, same ρ and α) recomputes only the closed form.
    """
    tree = NoisyBinaryTree.for_zcdp(depth, rho, root="public")
    sig = tree.prefix_std()[1 : 2**depth]
    sig_plus, shift, factor = tree.noise.combination_bound(sig, tree.n_noisy_nodes)
    z = -float(special.ndtri(level / factor))
    return (z, float(sig_plus.max()), float(np.max(shift)),
            float(np.sqrt(np.mean(sig**2))))


@functools.lru_cache(maxsize=1024)  # both ends of a level (and q = 1/2) ask the same
def _overshoot_bins(bin_ranks: float, sigma: float) -> float:
    """Model of the grid steps between the threshold crossing and the released end.

    Half a bin for the rounding to the next grid point, plus the expected number of later
    grid points that a noisy count (sd ``sigma``) still leaves un-rejected: the i-th point
    past the crossing is ≈ i·b ranks beyond it, and the released end passes it if any
    point at or after it is un-rejected, bounded by min(1, Σ_{i' ≥ i} Φ̄(i'·b/σ)).
    """
    b = max(bin_ranks, 1e-9)
    i = np.arange(1, math.ceil(10.0 * sigma / b) + 2, dtype=np.float64)
    miss = special.ndtr(-i * b / max(sigma, 1e-12))
    after = np.cumsum(miss[::-1])[::-1]
    return 0.5 + float(np.sum(np.minimum(after, 1.0)))


def localized_tree_depth(n: int, ps: Sequence[float], rho2: float, alpha_end: float,
                         ranks1: Sequence[tuple[int | None, int | None]]) -> int:
    r"""Depth D₂ of the localised tree: the minimiser of a public width model.

    An interval end of the tree method sits where the noisy prefix count crosses its
    envelope threshold, rounded outward to the next grid point. In ranks its distance to
    n·q is the threshold's excess e_D (a function of n, q, D, ρ₂, α: larger D means more
    noise per node) plus on average half a bin and more, and a bin of the localised range holds
    about b = W/2^D ranks, with W = k_U1 − k_L1 the distance between the stage-1 target
    ranks (the hull's for several q). A finer grid also gives the noise more grid points
    past the crossing that can stay un-rejected and push the end out
    (:func:`_overshoot_bins`). So D₂ minimises Σ_ends (e_D + b·overshoot(b, σ_D)) over
    :data:`TREE_DEPTHS`. Everything in the model is public (n, the levels, ρ₂, α and the
    stage-1 target ranks, which depend on public values only), so the choice spends no
    privacy, and the coverage argument holds for any fixed depth.
    """
    lows = [r[0] if r[0] is not None else 0 for r in ranks1]
    highs = [r[1] if r[1] is not None else n for r in ranks1]
    width = max(1.0, float(max(highs) - min(lows)))
    best, best_cost = TREE_DEPTHS[0], math.inf
    for depth in TREE_DEPTHS:
        b = width / 2.0**depth
        cost = 0.0
        for p in ps:
            for level_p in (p, 1.0 - p):
                excess, sd = _tree_end_excess(n, level_p, depth, rho2, alpha_end)
                cost += excess + b * _overshoot_bins(b, sd)
        if cost < best_cost:
            best, best_cost = depth, cost
    return best


#: The several-quantile tree takes the shallowest depth whose modelled width is within this
#: relative tolerance of the best (public): the model is flat near its minimum, and each
#: level saved halves the noise draws and the leaf counts.
SEGMENT_DEPTH_TOLERANCE: Final[float] = 0.005


def localized_segment_layout(n: int, ps: Sequence[float], rho2: float, alpha_end: float,
                             ranges: Sequence[tuple[float, float]],
                             ranks1: Sequence[tuple[int | None, int | None]]) -> SegmentLayout:
    r"""The localised tree's leaf layout for K ≥ 2 quantiles (public given stage 1).

    One dyadic grid per segment (the stage-1 ranges, merged where they meet;
    :mod:`dpfair.quantiles._segments`), sized by the width model of
    :func:`localized_tree_depth`: for each D in :data:`TREE_DEPTHS` the leaves are
    allocated by :func:`~dpfair.quantiles._segments.allocate_depths` from the segments'
    widths in ranks (W_s = max k_U1 − min k_L1 over its quantiles, from the stage-1 target
    ranks, which depend on public values only; a missing rank counts as 0 or n), and the
    modelled cost is Σ_q Σ_ends (e_D + b_q·overshoot(b_q, σ_D)) with b_q = W_s/2^{d_s}
    ranks per bin of q's segment. D is the smallest depth whose cost is within
    :data:`SEGMENT_DEPTH_TOLERANCE` of the least. Everything here is a function of public
    values and of stage 1's released ranges, so it spends nothing, and the stage-2
    coverage argument holds for the chosen grid as for any grid fixed before stage 2.
    """
    merged, member = merge_ranges(ranges)
    lows = [r[0] if r[0] is not None else 0 for r in ranks1]
    highs = [r[1] if r[1] is not None else n for r in ranks1]
    widths = [1.0] * len(merged)
    for s in range(len(merged)):
        qs = [i for i, m in enumerate(member) if m == s]
        widths[s] = max(1.0, float(max(highs[i] for i in qs) - min(lows[i] for i in qs)))
    costs: list[tuple[int, float, list[int]]] = []
    for depth in TREE_DEPTHS:
        alloc = allocate_depths(widths, depth)
        if alloc is None:
            continue
        cost = 0.0
        for i, p in enumerate(ps):
            s = member[i]
            b = widths[s] / 2.0 ** alloc[s]
            for level_p in (p, 1.0 - p):
                excess, sd = _tree_end_excess(n, level_p, depth, rho2, alpha_end)
                cost += excess + b * _overshoot_bins(b, sd)
        costs.append((depth, cost, alloc))
    if not costs:
        # More separate ranges than the deepest tree can hold (S·2 + S − 1 > 2^12, i.e.
        # S > 1365: thousands of levels on tens of millions of records). A refusal here
        # would come after stage 1 has read the data; the hull's uniform grid at the
        # single-range depth rule's D (the former layout, a public function of the same
        # values) is valid for any number of ranges, so it is used instead.
        depth = localized_tree_depth(n, ps, rho2, alpha_end, ranks1)
        return SegmentLayout(depth=depth, segments=((merged[0][0], merged[-1][1], depth),),
                             of_quantile=tuple(0 for _ in member))
    least = min(c for _, c, _ in costs)
    depth, _, alloc = next(t for t in costs if t[1] <= least * (1.0 + SEGMENT_DEPTH_TOLERANCE))
    return SegmentLayout(depth=depth,
                         segments=tuple((lo, hi, d) for (lo, hi), d in zip(merged, alloc,
                                                                            strict=True)),
                         of_quantile=tuple(member))


def _free_warnings(low: float, high: float, bounds: tuple[float, float], rho: float,
                   theta: float, localized: bool) -> tuple[str, ...]:
    """Warnings computed from released and public values only (post-processing).

    The public-bound and little-privacy texts and thresholds are :mod:`dpfair._advice`'s
    (the median's): ε > 10 at δ = 1e-6 by the library's own zCDP conversion.
    """
    msgs = [m for m in (on_public_bound(low, high, bounds, "quantile"),
                        little_privacy(Budget.zcdp(rho))) if m]
    width = high - low
    if not localized and width > 0 and theta >= width / 3.0:  # localised grids adapt
        msgs.append(
            f"the granularity {theta:.4g} is wide relative to the interval (width "
            f"{width:.4g}): the interval is a few grid steps; a finer granularity or the "
            "localised default (granularity=None) may be narrower."
        )
    return tuple(msgs)


def check_request(
    qs: Any, *, rho: float, bounds: tuple[float, float] | None, alpha: float = 0.05,
    method: str = "cdf", granularity: float | None = None, localize: bool | None = None,
    out_of_core: bool = False,
) -> tuple[list[float], float, float, tuple[float, float], bool, float]:
    """Validate a quantile request's public parameters, reading no data.

    The checks :func:`confidence_intervals` and (``out_of_core=True``, which also refuses
    ExpMech) :func:`confidence_intervals_from_queries` run before they touch the data: the
    levels, ρ, α, the public bounds (finite, lo < hi, finite width), the method and the grid
    step. A caller that charges a budget before it reads the data (a
    :class:`~dpfair.Session`) runs this first, so a typo costs nothing. Releases nothing.

    Returns
    -------
    (levels, rho, alpha, (lo, hi), localize, theta)
        The validated values (``localize`` resolved: the default localises when no
        ``granularity`` is given; theta the grid step of the non-localised path).

    Raises
    ------
    InvalidParameterError
        The first invalid parameter, named with its fix.
    """
    ps = _check_levels(qs)
    r, a, (lo, hi) = _check_request(rho, alpha, bounds, method)
    if out_of_core and method not in QUERY_METHODS:
        raise InvalidParameterError(
            f"method={method!r}: the out-of-core path serves {list(QUERY_METHODS)}; ExpMech "
            "needs the records' order statistics (load the column instead)."
        )
    loc = (granularity is None) if localize is None else bool(localize)
    theta = _theta(method, (lo, hi), granularity)
    return ps, r, a, (lo, hi), loc, theta


def _intervals(x: ArrayLike, qs: Sequence[float], rho: float, bounds: tuple[float, float] | None,
               alpha: float, method: str, granularity: float | None, localize: bool | None,
               rng: RandomLike) -> QuantileIntervals:
    ps, r, a, (lo, hi), loc, theta = check_request(
        qs, rho=rho, bounds=bounds, alpha=alpha, method=method, granularity=granularity,
        localize=localize)
    src = _prepare(x, (lo, hi))
    return _release(src, ps, r, (lo, hi), a, method, theta, loc, as_generator(rng))


def _release(src: Any, ps: list[float], r: float, bounds: tuple[float, float], a: float,
             method: str, theta: float, loc: bool, gen: np.random.Generator,
             stacklevel: int = 4) -> QuantileIntervals:
    """Run the engine on a prepared source (sorted data or count queries) and package."""
    lo, hi = bounds
    fallback: dict[str, Any] = {}
    if loc and not localization_regular(src.n, (lo, hi)):
        # public (n, R), before any data are read: bounds narrower than 2^-43 of their
        # magnitude leave no distinct stage-1 grid (R₂ could collapse to a point), so
        # the public-range method of the same name runs instead (all four methods), on
        # the caller's granularity (the default when none was given)
        loc = False
        fallback = {"localize_skipped": "bounds too narrow for their magnitude: |hi - lo| "
                                        "< 2^-43 max(|lo|, |hi|); ran the public-range method"}
    elif loc and method == "expmech" and not localized_expmech_regular(src.n, (lo, hi)):
        # public (n, R): stage-1 steps below 2^-1000 could give R₂ grids whose tail
        # constant exceeds K_E, so the public-range ExpMech (its own public C) runs instead
        loc = False
        theta = _theta(method, (lo, hi), None)
        fallback = {"localize_skipped": "bounds too narrow for a regular localised grid"}
    if loc:
        ends, spent, cdf, extra, thetas = _localized(src, ps, r, (lo, hi), a, method, gen)
    else:
        ends, spent, cdf, extra = _legacy(src, ps, r, (lo, hi), a, method, theta, gen)
        extra = {**extra, **fallback}
        thetas = [theta] * len(ps)
    intervals = []
    for p, (low, high, diag), th in zip(ps, ends, thetas, strict=True):
        msgs = _free_warnings(low, high, (lo, hi), r, th, loc)
        for m in msgs:
            warnings.warn(f"q={p:g}: {m}", QuantileWarning, stacklevel=stacklevel)
        intervals.append(QuantileInterval(
            low=low, high=high, estimate=0.5 * (low + high), q=p, method=method, alpha=a,
            n=src.n, bounds=(lo, hi), granularity=th, privacy=spent,
            diagnostics={**diag, "localized": loc, **extra}, cdf=cdf, warnings=msgs))
    return QuantileIntervals(intervals=tuple(intervals), privacy=spent, alpha=a,
                             method=method, cdf=cdf, diagnostics={"localized": loc, **extra})


#: Counts provider of the out-of-core path: (sub-range, depth) → leaf counts of the data
#: clipped into the sub-range (``dpfair.data.histogram_counts``'s contract).
HistogramProvider = Callable[[tuple[float, float], int], ArrayLike]
#: Count provider: g → #{x_i ≤ g} over the raw data.
CountProvider = Callable[[float], int]


class _Queries:
    """Count queries standing in for the sorted data (the tree and search methods)."""

    def __init__(self, n: int, count_at_most: CountProvider,
                 histogram: HistogramProvider) -> None:
        self.n = int(n)
        self._count = count_at_most
        self._histogram = histogram

    def count_at(self, bounds: tuple[float, float], depth: int) -> Any:
        """As :meth:`_Sorted.count_at`: #{clip(x, bounds) ≤ g_j} = #{x ≤ g_j} inside."""
        memo: dict[int, int] = {}  # one scan per distinct grid point

        def count(j: int) -> int:
            if j in memo:
                return memo[j]
            if j >= 1 << depth:
                return self.n
            g = grid_point(bounds, depth, j)
            c = self.n if g >= bounds[1] else int(self._count(g))
            memo[j] = c
            return c
        return count

    def count_many(self, bounds: tuple[float, float], depth: int) -> Any:
        """:meth:`count_at` for an array of grid indices (one scan per distinct point)."""
        count = self.count_at(bounds, depth)

        def many(js: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.array([count(int(j)) for j in js], dtype=np.int64)
        return many

    def leaves(self, bounds: tuple[float, float], depth: int) -> NDArray[np.int64]:
        out = np.asarray(self._histogram(bounds, depth), dtype=np.int64)
        if out.shape != (2**depth,) or int(out.sum()) != self.n:
            raise InvalidParameterError(
                f"histogram: expected {2**depth} counts summing to n={self.n} for the "
                f"sub-range {bounds} at depth {depth}; the counts provider must return "
                "the leaf counts of the data clipped into the sub-range."
            )
        return out

    def segment_leaves(self, layout: SegmentLayout) -> NDArray[np.int64]:
        """As :meth:`_Sorted.segment_leaves`, from one histogram per segment (the same
        integers: :func:`~dpfair.quantiles._segments.cumulative_from_histogram`)."""
        cum = cumulative_from_histogram(layout, self.n, self._histogram,  # type: ignore[arg-type]
                                        lambda g: int(self._count(g)))
        return leaves_from_cumulative(cum, self.n, layout.depth)


#: Methods the out-of-core path serves (ExpMech needs order statistics).
QUERY_METHODS: Final[tuple[str, ...]] = ("cdf", "binsearch", "binsearch_cdf")


def confidence_intervals_from_queries(
    n: int,
    count_at_most: CountProvider,
    histogram: HistogramProvider,
    qs: Sequence[float],
    *,
    rho: float,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    method: str = "cdf",
    granularity: float | None = None,
    localize: bool | None = None,
    rng: RandomLike = None,
) -> QuantileIntervals:
    """:func:`confidence_intervals` from count queries instead of the data (out of core).

    Parameters
    ----------
    n : int
        The (public) number of records.
    count_at_most : callable float -> int
        ``count_at_most(g)`` = #{x_i ≤ g}, exact (e.g. one DuckDB ``count(*)`` scan).
    histogram : callable ((lo, hi), depth) -> array of 2^depth ints
        Leaf counts of the data clipped into the sub-range (the contract of
        :func:`dpfair.data.histogram_counts`, depth ≤ 24).
    qs, rho, bounds, alpha, granularity, localize, rng
        As in :func:`confidence_intervals`.
    method : {"cdf", "binsearch", "binsearch_cdf"}, default="cdf"
        ExpMech needs order statistics and is not served here.

    Returns
    -------
    QuantileIntervals
        The SAME result as :func:`confidence_intervals` on the data in memory, for the
        same ``rng``: every method here reads the data only through #{x ≤ g} at grid
        points and leaf counts of clipped data, which the queries return exactly, and
        draws the same noise in the same order (tested on CSV and Parquet files).

    Notes
    -----
    Privacy and coverage are those of :func:`confidence_intervals` (the same mechanisms
    on the same counts). Cost: the localisation stage and BinSearch issue one count query
    per search step (2·D₁ per quantile, D₁ = :func:`localization_depth`), the trees one
    histogram query — or, for several localised quantiles, one per merged stage-1 range
    (:func:`localized_segment_layout`) plus a count query at each end shared with a gap.
    The queries' answers are never released, only the noisy results.
    """
    ps, r, a, (lo, hi), loc, theta = check_request(
        qs, rho=rho, bounds=bounds, alpha=alpha, method=method, granularity=granularity,
        localize=localize, out_of_core=True)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidParameterError(f"n={n!r}: expected the number of records, an int >= 1.")
    src = _Queries(int(n), count_at_most, histogram)
    return _release(src, ps, r, (lo, hi), a, method, theta, loc, as_generator(rng),
                    stacklevel=3)


def file_queries(path: str | os.PathLike[str], column: str
                 ) -> tuple[int, CountProvider, HistogramProvider]:
    """(n, count_at_most, histogram) for one numeric column of a CSV or Parquet file.

    Read through DuckDB, never loaded: ``histogram`` is
    :func:`dpfair.data.histogram_counts` (which also rejects NULL/NaN/inf and
    non-numeric columns; it runs first, and gives n), ``count_at_most(g)`` one
    ``count(*)`` scan with g bound as an exact binary64 parameter.
    """
    from dpfair.data import histogram_counts
    from dpfair.data.sql import connect, quote, scan

    name = str(column)
    n = int(np.sum(histogram_counts(path, name, (0.0, 1.0), 1)))  # validates the column
    sql = (f"SELECT count(*) FROM {scan(path)} "
           f"WHERE CAST({quote(name)} AS DOUBLE) <= ?")

    def count_at_most(g: float) -> int:
        con = connect()
        try:
            row = con.execute(sql, [float(g)]).fetchone()
        finally:
            con.close()
        return int(row[0]) if row else 0

    def histogram(sub: tuple[float, float], depth: int) -> NDArray[np.int64]:
        return histogram_counts(path, name, sub, depth)

    return n, count_at_most, histogram


def confidence_interval(
    x: ArrayLike,
    q: float,
    *,
    rho: float,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    method: str = "cdf",
    granularity: float | None = None,
    localize: bool | None = None,
    rng: RandomLike = None,
) -> QuantileInterval:
    """Differentially private (1 − α) confidence interval for the population q-quantile.

    Parameters
    ----------
    x : array-like of shape (n,)
        The private sample; NaN/inf raise; n is public (replace-one neighbours).
    q : float
        Quantile level in (0, 1); x_q = inf{x : F(x) ≥ q}.
    rho : float
        zCDP budget, > 0; ``result.privacy`` reports what was spent (at most ρ).
    bounds : (float, float)
        Public range R promised to contain x_q; data are clipped into R (on a copy).
    alpha : float, default=0.05
        Miscoverage in (0, 1).
    method : {"expmech", "cdf", "binsearch", "binsearch_cdf"}, default="cdf"
        As in :func:`dpfair.median.confidence_interval`, with exact rank targets for q at
        each end (Bin(n, q) for the lower end, Bin(n, 1 − q) mirrored for the upper end:
        the ends are not symmetric). ``"cdf"`` is the default because it was the narrowest
        in our measurements (``docs/quantiles.md``).
    granularity : float, optional
        θ of the paper's methods on the whole range. Giving it turns localisation off
        unless ``localize=True``.
    localize : bool, optional
        Default (None): localise when ``granularity`` is None. A charged private stage
        (10 % of ρ, 1 % or 5 % of α) finds a sub-range containing x_q, and the method then runs
        there with a grid set by that range (see :func:`dpfair.quantiles._api._localized`):
        narrower intervals, and the default no longer depends on how wide R is.
        ``localize=False`` with ``granularity=None`` runs the median's paper defaults.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    QuantileInterval

    Notes
    -----
    Privacy: ρ-zCDP under replace-one neighbours for every method and both modes (the
    stages compose; every count, tree and exponential-mechanism draw is the median's exact
    mechanism as executed, see ``docs/floating_point.md``). Coverage ≥ 1 − α for every
    population with x_q in R, also with atoms (module docstring of
    :mod:`dpfair.quantiles._methods`). An end with no valid target rank is the public
    bound (with a warning). With ``q=0.5, localize=False`` the result equals
    :func:`dpfair.median.confidence_interval` for the same seed.

    Warnings (free: computed from the output and public inputs only) are emitted as
    :class:`QuantileWarning` and kept in ``result.warnings``.

    Examples
    --------
    >>> import numpy as np, dpfair
    >>> x = np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 1000)
    >>> r = dpfair.quantiles.confidence_interval(x, 0.9, rho=0.5, bounds=(-5, 15), rng=1)
    >>> bool(r.low < 1.5 * np.exp(1.2816) < r.high)
    True
    """
    qq = check_in_open_interval("q", q, 0.0, 1.0)
    return _intervals(x, [qq], rho, bounds, alpha, str(method), granularity, localize,
                      rng).intervals[0]


def confidence_intervals(
    x: ArrayLike,
    qs: Sequence[float],
    *,
    rho: float,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    method: str = "cdf",
    granularity: float | None = None,
    localize: bool | None = None,
    rng: RandomLike = None,
) -> QuantileIntervals:
    """Private intervals for several quantiles with SIMULTANEOUS coverage ≥ 1 − α.

    Parameters are those of :func:`confidence_interval`; ``qs`` is a sequence of levels.

    Returns
    -------
    QuantileIntervals
        ``.intervals`` in the order of ``qs``; ``.privacy`` the total spent (≤ ρ).

    Notes
    -----
    Simultaneity (Bonferroni over the 2K ends): each of the K quantiles gets α/K, split
    α/(2K) per end (when localised, a share of that goes to the localisation stage; a
    stage-1 end with no valid rank passes its share to both stage-2 ends, so one end may
    get more than α/(2K) while the two together keep α/K), so
    P(∃ q: x_q ∉ CI_q) ≤ Σ_q P(x_q ∉ CI_q) ≤ K·α/K = α whatever the dependence between
    the intervals (they share the sample, and for the tree methods one noisy release).
    A joint order-statistic bound could be tighter for close levels; Bonferroni's cost is
    mild here because each end's rank target moves with the binomial tail's log-quantile
    (e.g. the z of α/10 vs α/2: 2.58 vs 1.96).

    Budget: the tree methods (``"cdf"``, and ``"binsearch_cdf"``'s second stage) release
    ONE tree and read every quantile off it, so the tree's noise does not grow with K;
    ``"expmech"`` and ``"binsearch"`` split ρ over the K quantiles (ρ/K each).
    """
    return _intervals(x, qs, rho, bounds, alpha, str(method), granularity, localize, rng)


# ---------------------------------------------------------------------------- CDF band
def _band_split(n: int, sigma_max: float, n_points: int, factor: float,
                alpha: float) -> tuple[float, float, float]:
    """(α_sampling, ε_DKW, z) minimising ε_DKW + z·σ_max/n over the split (public)."""

    def parts(frac: float) -> tuple[float, float]:
        a_s = alpha * frac
        eps = math.sqrt(math.log(2.0 / a_s) / (2.0 * n))
        z = -float(special.ndtri((alpha - a_s) / (2.0 * factor * n_points)))
        return eps, z

    res = optimize.minimize_scalar(lambda f: parts(f)[0] + parts(f)[1] * sigma_max / n,
                                   bounds=(1e-3, 1 - 1e-3), method="bounded")
    frac = float(res.x)
    eps, z = parts(frac)
    return alpha * frac, eps, z


def cdf_band(
    x: ArrayLike,
    *,
    rho: float,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    granularity: float | None = None,
    rng: RandomLike = None,
) -> CdfBand:
    r"""The DP CDF with a simultaneous (1 − α) band for the population CDF (ρ-zCDP).

    Parameters
    ----------
    x : array-like of shape (n,)
        Private sample (clipped into ``bounds``).
    rho : float
        zCDP budget, all of it spent on one noisy binary tree (σ² = D/ρ per node).
    bounds : (float, float)
        Public range R.
    alpha : float, default=0.05
    granularity : float, optional
        Grid step θ (default |R|/400: 2^D bins with width ≤ θ).
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    CdfBand

    Notes
    -----
    With c_j = #{x_i ≤ g_j} and C̃_j the Honaker estimate from the tree,
    F(g_j) − C̃_j/n = (F(g_j) − c_j/n) + (c_j − C̃_j)/n. The band splits α = α_s + α_N:

    * sampling: the Dvoretzky–Kiefer–Wolfowitz inequality with Massart's constant,
      P(sup_t |F_n(t) − F(t)| > ε_s) ≤ 2e^{−2nε_s²} = α_s (valid for every F, atoms
      included, and every n);
    * noise: for each of the m = 2^D interior-and-top grid points, the executed discrete
      Gaussian combination obeys P(|C̃_j − c_j| ≥ u) ≤ 2f·Φ̄((u − w_j)/σ⁺_j)
      (:meth:`~dpfair.mechanisms.discrete_gaussian.LatticeNoise.combination_bound`), so
      u_j = w_j + z·σ⁺_j with z = Φ̄^{-1}(α_N/(2fm)) holds for all j at once w.p. ≥ 1 − α_N
      (union bound over the grid).

    The split α_s/α_N minimises ε_s + z·max σ⁺/n and depends only on public values. The
    band [C̃_j/n − ε_s − u_j/n, C̃_j/n + ε_s + u_j/n] is then clipped to [0, 1] and made
    monotone (lower: running maximum from the left; upper: running minimum from the
    right), which keeps it valid because F is non-decreasing. Everything after the tree is
    post-processing, so the band costs ρ in total. The band covers F at the grid points
    g_1..g_{2^D} (F(hi) = 1 after clipping).
    """
    r, a, (lo, hi) = _check_request(rho, alpha, bounds, "cdf")
    theta = _theta("cdf", (lo, hi), granularity)
    depth = grid_depth(hi - lo, theta)
    src = _prepare(x, (lo, hi))
    n = src.n
    gen = as_generator(rng)
    tree = NoisyBinaryTree.for_zcdp(depth, r, root="public")
    acct = Accountant(Budget.zcdp(r))
    acct.charge(tree.privacy, label="cdf_band/tree")
    consistent = tree.release(src.leaves((lo, hi), depth), rng=gen).consistent()
    prefix = np.asarray(consistent.prefix, dtype=np.float64)
    std = np.asarray(consistent.prefix_std, dtype=np.float64)
    grid = leaf_edges((lo, hi), depth)
    idx = np.arange(1, 2**depth + 1)
    sig_plus, shift, factor = tree.noise.combination_bound(std[idx], tree.n_noisy_nodes)
    m = idx.size
    a_s, eps, z = _band_split(n, float(sig_plus.max()), m, factor, a)
    half = eps + (shift + z * sig_plus) / n
    est = prefix[idx] / n
    lower = np.maximum.accumulate(np.clip(est - half, 0.0, 1.0))
    upper = np.minimum.accumulate(np.clip(est + half, 0.0, 1.0)[::-1])[::-1]
    upper[-1] = 1.0
    values = np.maximum.accumulate(np.clip(est, 0.0, 1.0))
    return CdfBand(grid=grid[idx], values=values, lower=lower, upper=upper, alpha=a, n=n,
                   privacy=acct.spent,
                   diagnostics={"depth": depth, "dkw_epsilon": eps, "alpha_sampling": a_s,
                                "noise_z": z, "sigma_node": tree.sigma})


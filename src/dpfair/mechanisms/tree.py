"""Noisy binary tree of counts with Honaker's optimal (BLUE) consistent post-processing.

A histogram over 2^D equal-width bins of a public interval is summarised by a complete binary
tree: level ℓ (ℓ = 0..D) holds 2^ℓ node counts, node (ℓ, i) counting the records in leaves
``i·2^(D−ℓ) .. (i+1)·2^(D−ℓ) − 1``. Every node of levels 1..D is released with independent
N(0, σ²) noise; the root (level 0, the total count) is either public and exact or noisy too.

Two estimators of prefix counts P_j = Σ leaves[:j] (and tail counts) are provided:

* :meth:`NoisyTree.dyadic_prefix` / :meth:`NoisyTree.dyadic_suffix`: the sum of the O(D)
  canonical dyadic nodes, no post-processing;
* :meth:`NoisyTree.consistent`: Honaker's (2015) least-squares estimate of the whole tree
  subject to children summing to their parent — the best linear unbiased estimator (BLUE) —
  computed in O(2^D) by two passes, with the *exact* standard deviation of every prefix
  estimate computed in O(2^D) as well (:func:`honaker_prefix_std`).

The derivations (BLUE of the two-pass algorithm, the independent "Haar" decomposition of the
estimation error and the resulting closed form of every prefix variance) are written out in
``docs/proofs/honaker_tree.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import (
    check_finite_1d,
    check_interval_bounds,
    check_positive,
    check_positive_int,
)
from dpfair.mechanisms.gaussian_calibration import (
    discrete_gaussian_privacy_at,
    discrete_gaussian_sigma,
)
from dpfair.mechanisms.lattice import LatticeNoise
from dpfair.privacy import Budget

#: Public bound on any count released with lattice noise (2^40 records).
_COUNT_MAGNITUDE = float(2**40)

__all__ = [
    "ConsistentTree",
    "DyadicEstimate",
    "NoisyBinaryTree",
    "NoisyTree",
    "RootMode",
    "honaker_prefix_std",
    "leaf_counts",
    "leaf_counts_sorted",
    "leaf_edges",
    "node_counts",
]

RootMode = Literal["public", "noisy"]

#: Largest supported depth: 2^30 leaves already need 8 GiB per float level.
MAX_DEPTH = 30


# ---------------------------------------------------------------------------- validation
def _check_depth(depth: Any) -> int:
    d = check_positive_int("depth", depth)
    if d > MAX_DEPTH:
        raise InvalidParameterError(
            f"depth={depth!r}: at most {MAX_DEPTH} is supported (2^depth leaves are held in "
            "memory); use a coarser grid."
        )
    return d


def _check_root(root: Any) -> RootMode:
    if root not in ("public", "noisy"):
        raise InvalidParameterError(
            f"root={root!r}: expected 'public' (the total count n is public and released "
            "exactly) or 'noisy' (the total is private and released with noise)."
        )
    out: RootMode = root
    return out


def _readonly(arr: NDArray[Any]) -> NDArray[Any]:
    arr.flags.writeable = False
    return arr


def _n_noisy_levels(depth: int, root: RootMode) -> int:
    return depth + 1 if root == "noisy" else depth


# ---------------------------------------------------------------------------- leaves
def leaf_edges(bounds: Sequence[float], depth: int) -> NDArray[np.float64]:
    """The 2^D + 1 grid points g_j = lo + j·(hi − lo)/2^D, j = 0..2^D, of the leaf bins.

    Parameters
    ----------
    bounds : (float, float)
        Public range ``(lo, hi)`` with ``lo < hi``.
    depth : int
        Tree depth D ≥ 1.

    Returns
    -------
    ndarray of shape (2^D + 1,)
        Increasing grid points with ``g[0] == lo`` and ``g[-1] == hi`` exactly. These are
        the points at which :func:`leaf_counts` draws its bin boundaries.
    """
    lo, hi = check_interval_bounds("bounds", bounds)
    d = _check_depth(depth)
    n_leaves = 1 << d
    if not math.isfinite(hi - lo):
        raise InvalidParameterError(
            f"bounds=({lo!r}, {hi!r}): the width hi - lo overflows a float; rescale the data."
        )
    # j / 2^D is exact in binary floating point, so every g_j is one rounding of the ideal.
    grid = lo + (hi - lo) * (np.arange(n_leaves + 1, dtype=np.float64) / n_leaves)
    grid[0], grid[-1] = lo, hi
    return grid


def leaf_counts(values: ArrayLike, bounds: Sequence[float], depth: int) -> NDArray[np.int64]:
    """Counts of ``values`` in the 2^D equal-width bins of the public range ``bounds``.

    Parameters
    ----------
    values : array-like of shape (n,)
        Finite data, all inside ``[lo, hi]``. Values outside the public range are an error:
        clip them first, e.g. ``np.clip(values, lo, hi)`` (clipping to *public* bounds is
        allowed and costs no privacy; dropping records is not done silently).
    bounds : (float, float)
        Public range ``(lo, hi)``; never derived from the data.
    depth : int
        Tree depth D ≥ 1, so there are 2^D bins.

    Returns
    -------
    ndarray of int64, shape (2^D,)
        ``counts[j] = #{x : g_j < x ≤ g_{j+1}}`` with g = :func:`leaf_edges`, except that bin
        0 also contains ``lo`` itself. Hence ``counts[:j].sum() == #{x ≤ g_j}`` for every
        j ≥ 1: prefix sums are empirical CDF values at the grid points.

    Raises
    ------
    InvalidDataError
        NaN/inf values, or values outside ``bounds``.
    MissingPublicBoundError
        ``bounds`` is None.

    Notes
    -----
    Speed and memory: a float64 array is read in place (no copy). Sorted input (checked
    in O(n) with a fixed-size buffer) is counted by :func:`leaf_counts_sorted`, 2^D binary
    searches; any other input is binned in chunks of 2^20 values, so the temporary memory
    is O(2^20 + 2^D) whatever n is. Both paths return exactly the counts of the rule above
    (exact float comparisons with the grid points), so the result does not depend on the
    path.
    """
    x = _finite_values("values", values)
    lo, hi = check_interval_bounds("bounds", bounds)
    grid = leaf_edges((lo, hi), depth)
    if x.size:
        mn, mx = float(x.min()), float(x.max())
        if mn < lo or mx > hi:
            outside = (x < lo) | (x > hi)
            idx = np.flatnonzero(outside)
            raise InvalidDataError(
                f"values contains {idx.size} value(s) outside bounds=({lo!r}, {hi!r}), first "
                f"{x[idx[0]]!r} at index {idx[0]}: clip them to the public range first, e.g. "
                "np.clip(values, lo, hi), or widen bounds (using public knowledge only)."
            )
    if _is_sorted(x):
        return _sorted_counts(x, grid)
    n_leaves = grid.size - 1
    counts = np.zeros(n_leaves, dtype=np.int64)
    for start in range(0, x.size, _CHUNK):
        counts += _chunk_counts(x[start : start + _CHUNK], grid, lo, hi)
    return counts


#: Values binned per chunk by :func:`leaf_counts` (bounds its temporary memory).
_CHUNK = 1 << 20
#: Pairs compared per chunk by the sortedness check.
_SORT_CHECK_CHUNK = 1 << 16


def _finite_values(name: str, values: ArrayLike) -> NDArray[np.float64]:
    """``values`` as a 1-D float64 array, without copying a float64 array; NaN/inf raise."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.ndim == 1:
        x = values
        if x.size and not (math.isfinite(float(x.min())) and math.isfinite(float(x.max()))):
            check_finite_1d(name, x, min_size=0)  # raises the standard message
        return x
    return check_finite_1d(name, values, min_size=0)


def _is_sorted(x: NDArray[np.float64]) -> bool:
    """Whether ``x`` is non-decreasing (NaN-free input), with O(chunk) extra memory."""
    if x.size < 2:
        return True
    step = _SORT_CHECK_CHUNK
    buf = np.empty(step, dtype=np.bool_)
    for start in range(0, x.size - 1, step):
        stop = min(start + step, x.size - 1)
        out = buf[: stop - start]
        np.greater_equal(x[start + 1 : stop + 1], x[start:stop], out=out)
        if not out.all():
            return False
    return True


def _sorted_counts(x_sorted: NDArray[np.float64], grid: NDArray[np.float64]) -> NDArray[np.int64]:
    """The rule's counts of sorted data: #{x ≤ g_j} by binary search at the inner points.

    Every value below ``grid[1]`` (including any below lo) lands in bin 0 and every value
    above ``grid[-2]`` in the last bin: the counts of the data clipped into the range.
    """
    cum = np.empty(grid.size, dtype=np.int64)
    cum[0] = 0
    cum[-1] = x_sorted.size
    cum[1:-1] = np.searchsorted(x_sorted, grid[1:-1], side="right")
    return np.diff(cum)


def _chunk_counts(
    x: NDArray[np.float64], grid: NDArray[np.float64], lo: float, hi: float
) -> NDArray[np.int64]:
    n_leaves = grid.size - 1
    # Bin j holds x with g_j < x <= g_{j+1} (bin 0 also holds lo): j = ceil((x-lo)/w) - 1.
    # The arithmetic guess can be off by one ulp-sized step near a grid point; the exact
    # comparisons against `grid` below settle every such case (never floor/int truncation,
    # which rounds towards zero for negative offsets).
    scale = n_leaves / (hi - lo)
    if math.isfinite(scale):
        bins = np.ceil((x - lo) * scale).astype(np.int64) - 1
    else:  # a sub-normal width: no arithmetic guess, binary search only
        bins = np.searchsorted(grid[1:], x, side="left").astype(np.int64)
    np.clip(bins, 0, n_leaves - 1, out=bins)
    while True:
        up = x > grid[bins + 1]
        down = (x <= grid[bins]) & (bins > 0)
        if not (up.any() or down.any()):
            break
        bins += up
        bins -= down
    return np.bincount(bins, minlength=n_leaves).astype(np.int64, copy=False)


def leaf_counts_sorted(
    x_sorted: ArrayLike, bounds: Sequence[float], depth: int, *, check: bool = True
) -> NDArray[np.int64]:
    """:func:`leaf_counts` of sorted data clipped into ``bounds``, in O(2^D log n).

    Parameters
    ----------
    x_sorted : array-like of shape (n,)
        Finite data in non-decreasing order. Values outside ``bounds`` are counted as if
        clipped into it (first or last bin), so no clipped copy is needed: the result is
        ``leaf_counts(np.clip(x_sorted, lo, hi), bounds, depth)`` exactly.
    bounds : (float, float)
        Public range ``(lo, hi)``.
    depth : int
        Tree depth D ≥ 1.
    check : bool, default True
        Verify (O(n), O(2^16) memory) that the data are sorted; pass False only when the
        caller has just sorted them.

    Returns
    -------
    ndarray of int64, shape (2^D,)

    Raises
    ------
    InvalidDataError
        Unsorted data (with ``check=True``); NaN/inf (only detectable with ``check=True``).

    Notes
    -----
    2^D − 1 binary searches for #{x ≤ g_j} on the sorted array: no per-record work and no
    temporary of size n (the median's tree methods and the quantile API read their counts
    this way from the sorted sample they already hold).
    """
    x = np.asarray(x_sorted, dtype=np.float64)
    if x.ndim != 1:
        raise InvalidDataError(f"x_sorted: expected a 1-D array, got shape {x.shape}.")
    lo, hi = check_interval_bounds("bounds", bounds)
    grid = leaf_edges((lo, hi), depth)
    if check:
        _finite_values("x_sorted", x)
        if not _is_sorted(x):
            raise InvalidDataError(
                "x_sorted is not in non-decreasing order: sort it first (np.sort) or use "
                "leaf_counts, which accepts any order."
            )
    return _sorted_counts(x, grid)


def _check_leaf_counts(counts: ArrayLike, depth: int) -> NDArray[np.int64]:
    try:
        arr = np.asarray(counts)
        arr = arr.astype(np.float64, copy=False) if arr.dtype.kind not in "iu" else arr
    except (TypeError, ValueError):
        raise InvalidDataError("leaf_counts: expected a 1-D array of counts.") from None
    n_leaves = 1 << depth
    if arr.ndim != 1 or arr.size != n_leaves:
        raise InvalidDataError(
            f"leaf_counts has shape {arr.shape}: a tree of depth={depth} needs exactly "
            f"2**depth = {n_leaves} leaf counts; build them with "
            "leaf_counts(values, bounds, depth)."
        )
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            raise InvalidDataError(
                f"leaf_counts contains {int(bad.sum())} NaN/inf value(s), first at index "
                f"{int(np.flatnonzero(bad)[0])}: counts must be finite integers."
            )
        frac = arr != np.round(arr)
        if frac.any():
            raise InvalidDataError(
                f"leaf_counts[{int(np.flatnonzero(frac)[0])}] is not an integer: the "
                "sensitivity analysis assumes each record adds exactly 1 to one leaf."
            )
    neg = arr < 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise InvalidDataError(
            f"leaf_counts[{i}] = {arr[i].item()!r} is negative: counts must be >= 0."
        )
    return arr.astype(np.int64)


def node_counts(counts: ArrayLike) -> tuple[NDArray[np.int64], ...]:
    """Exact node counts of every level, built bottom-up by pairwise sums.

    Parameters
    ----------
    counts : array-like of shape (2^D,)
        Non-negative integer leaf counts, D ≥ 1.

    Returns
    -------
    tuple of D + 1 int64 arrays
        ``levels[ℓ]`` has 2^ℓ entries; ``levels[D]`` are the leaves and ``levels[0]`` is the
        total. Node i of level ℓ equals the sum of nodes 2i and 2i + 1 of level ℓ + 1.
    """
    size = int(np.size(counts))
    if size < 2 or size & (size - 1):
        raise InvalidDataError(
            f"leaf_counts has {size} entries: expected a power of two >= 2 (2**depth)."
        )
    depth = size.bit_length() - 1
    leaves = _check_leaf_counts(counts, depth)
    return _build_levels(leaves)


def _build_levels(leaves: NDArray[np.int64]) -> tuple[NDArray[np.int64], ...]:
    levels = [leaves]
    while levels[-1].size > 1:
        below = levels[-1]
        levels.append(below[0::2] + below[1::2])
    return tuple(reversed(levels))


# ---------------------------------------------------------------------------- dyadic sums
class DyadicEstimate(NamedTuple):
    """Estimates with their exact standard deviations (unpacks as ``est, std``)."""

    estimate: NDArray[np.float64]
    std: NDArray[np.float64]


def _dyadic_prefix(
    levels: Sequence[NDArray[np.float64]], root_noisy: bool
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Prefix sums P_j, j = 0..2^D, from canonical dyadic nodes, and the node counts used.

    Boundaries of level ℓ + 1 are refined from those of level ℓ: P_{2i} = P_i (same point)
    and P_{2i+1} = P_i + node(ℓ+1, 2i) (add the left child), so P_j is the sum of the left
    siblings along the path to boundary j — popcount(j) nodes — and P_{2^D} is the root.
    """
    est = np.array([0.0, float(levels[0][0])])
    used = np.array([0, 1 if root_noisy else 0], dtype=np.int64)
    for lvl in levels[1:]:
        nxt = np.empty(2 * est.size - 1)
        nxt[0::2] = est
        nxt[1::2] = est[:-1] + lvl[0::2]
        cnt = np.empty(nxt.size, dtype=np.int64)
        cnt[0::2] = used
        cnt[1::2] = used[:-1] + 1
        est, used = nxt, cnt
    return est, used


# ---------------------------------------------------------------------------- Honaker
def _subtree_variance(height: int) -> float:
    """Var of the bottom-up (subtree-only) estimate of a node of this height, for σ = 1.

    V_0 = 1 (a leaf), 1/V_h = 1 + 1/(2 V_{h−1}), hence V_h = 2^h / (2^{h+1} − 1).
    """
    return 2.0**height / (2.0 ** (height + 1) - 1.0)


def _two_pass(
    levels: Sequence[NDArray[np.float64]], root_public: bool
) -> tuple[NDArray[np.float64], ...]:
    """Honaker's two-pass BLUE of all node counts (equal noise variance on noisy nodes)."""
    depth = len(levels) - 1
    # Bottom-up: z = inverse-variance mean of own measurement and the children's sum.
    z: list[NDArray[np.float64]] = [np.empty(0)] * (depth + 1)
    z[depth] = np.asarray(levels[depth], dtype=np.float64)
    for m in range(depth - 1, 0 if root_public else -1, -1):
        w = _subtree_variance(depth - m)  # weight on own measurement = V_h / σ²
        below = z[m + 1]
        z[m] = w * levels[m] + (1.0 - w) * (below[0::2] + below[1::2])
    # Top-down: split each parent's discrepancy equally between the two children.
    out: list[NDArray[np.float64]] = [np.asarray(levels[0], dtype=np.float64).copy()]
    if not root_public:
        out[0] = z[0].copy()
    for m in range(depth):
        left, right = z[m + 1][0::2], z[m + 1][1::2]
        half_gap = 0.5 * (out[m] - left - right)
        nxt = np.empty(2 * out[m].size)
        nxt[0::2] = left + half_gap
        nxt[1::2] = right + half_gap
        out.append(nxt)
    return tuple(out)


@lru_cache(maxsize=4)
def _unit_prefix_variance(depth: int, root_noisy: bool) -> NDArray[np.float64]:
    """Var(P̂_j − P_j)/σ² of the Honaker prefix estimates, j = 0..2^D, in O(2^D).

    Var/σ² = [root noisy]·(j/2^D)²·V_D + Σ_{k=0}^{D−1} tent(u_k)² · V_{D−k−1}/2 with
    u_k = (j mod 2^{D−k})/2^{D−k} and tent(u) = 2·min(u, 1 − u) (docs/proofs/honaker_tree.md,
    Eq. (7)). The level-k term is periodic in j with period 2^{D−k}, so the sum is built from
    the leaves up by tiling: G_h(r) over a node of height h (r = 0..2^h) is
    G_h(r) = tent(r/2^h)² · V_{h−1}/2 + G_{h−1}(r mod 2^{h−1}).
    """
    g = np.zeros(2)  # height 0: a leaf, G_0(0) = G_0(1) = 0
    for h in range(1, depth + 1):
        size = 1 << h
        r = np.arange(size + 1, dtype=np.float64)
        tent = 2.0 * np.minimum(r, size - r) / size
        g = np.concatenate((g[:-1], g)) + tent * tent * (0.5 * _subtree_variance(h - 1))
    if root_noisy:
        n_leaves = 1 << depth
        frac = np.arange(n_leaves + 1, dtype=np.float64) / n_leaves
        g = g + frac * frac * _subtree_variance(depth)
    return _readonly(g)


def honaker_prefix_std(depth: int, sigma: float, root: RootMode = "public") -> NDArray[np.float64]:
    """Exact standard deviations of Honaker's consistent prefix estimates, in O(2^D).

    Parameters
    ----------
    depth : int
        Tree depth D ≥ 1 (2^D leaves).
    sigma : float
        Noise standard deviation on every noisy node.
    root : {"public", "noisy"}, default "public"
        Whether the root (total count) is exact or noisy.

    Returns
    -------
    ndarray of shape (2^D + 1,)
        ``std[j]`` such that the consistent estimate of P_j = Σ leaves[:j] is distributed
        exactly as N(P_j, std[j]²). ``std[0] == 0``; with a public root ``std[-1] == 0``.

    Notes
    -----
    The estimator's weights depend only on the tree shape, so the result depends on
    (D, σ, root) and never on data; the unit-σ profile is cached. The closed form (see
    ``docs/proofs/honaker_tree.md``) is, with V_h = 2^h/(2^{h+1} − 1),

        std[j]² / σ² = [root noisy]·(j/2^D)²·V_D
                       + Σ_{k=0}^{D−1} (2·min(u_k, 1 − u_k))² · V_{D−k−1} / 2,

    where u_k = (j mod 2^{D−k})/2^{D−k} is the relative position of boundary j inside its
    level-k ancestor. It is evaluated for all j in O(2^D) time, with no matrix.
    """
    d = _check_depth(depth)
    s = check_positive("sigma", sigma)
    r = _check_root(root)
    return s * np.sqrt(_unit_prefix_variance(d, r == "noisy"))


# ---------------------------------------------------------------------------- results
def _check_levels(levels: Any, depth: int) -> tuple[NDArray[np.float64], ...]:
    try:
        seq = tuple(levels)
    except TypeError:
        raise InvalidDataError("levels: expected a sequence of depth + 1 arrays.") from None
    if len(seq) != depth + 1:
        raise InvalidDataError(
            f"levels has {len(seq)} arrays: a tree of depth={depth} has depth + 1 = "
            f"{depth + 1} levels (0 = root .. depth = leaves)."
        )
    out = []
    for ell, lvl in enumerate(seq):
        arr = np.array(lvl, dtype=np.float64, copy=True)
        if arr.shape != (1 << ell,):
            raise InvalidDataError(
                f"levels[{ell}] has shape {arr.shape}: level {ell} has 2**{ell} = {1 << ell} nodes."
            )
        if not np.all(np.isfinite(arr)):
            raise InvalidDataError(f"levels[{ell}] contains NaN or inf: counts must be finite.")
        out.append(_readonly(arr))
    return tuple(out)


@dataclass(frozen=True, eq=False)
class ConsistentTree:
    """Honaker's consistent (BLUE) estimate of a noisy binary tree.

    Attributes
    ----------
    depth : int
    sigma : float
        Noise standard deviation of the measured nodes.
    root : {"public", "noisy"}
    levels : tuple of ndarray
        Estimated node counts, ``levels[ℓ]`` of length 2^ℓ; every parent equals the sum of
        its two children (up to float rounding); ``levels[0]`` is n exactly for a public
        root.
    leaves : ndarray of shape (2^D,)
        ``levels[depth]``.
    prefix : ndarray of shape (2^D + 1,)
        ``prefix[j]`` estimates P_j = Σ leaves[:j] (the count of records ≤ grid point g_j
        for :func:`leaf_counts` bins); ``prefix[0] == 0``.
    prefix_std : ndarray of shape (2^D + 1,)
        Exact standard deviation: ``prefix[j] ~ N(P_j, prefix_std[j]²)`` over the noise.

    Notes
    -----
    Every estimate is a fixed linear function of the Gaussian noise, so its marginal is
    exactly normal and centred (unbiased). Estimates at different j are correlated; only the
    marginals are given. Post-processing: no further privacy cost.
    """

    depth: int
    sigma: float
    root: RootMode
    levels: tuple[NDArray[np.float64], ...]
    prefix: NDArray[np.float64]
    prefix_std: NDArray[np.float64]

    @property
    def leaves(self) -> NDArray[np.float64]:
        """Estimated leaf counts (length 2^D)."""
        return self.levels[-1]

    @property
    def total(self) -> float:
        """Estimated (public root: exact) total count."""
        return float(self.levels[0][0])

    @property
    def suffix(self) -> NDArray[np.float64]:
        """``suffix[j]`` estimates Σ leaves[j:], j = 0..2^D (``total − prefix``)."""
        return self.prefix[-1] - self.prefix

    @property
    def suffix_std(self) -> NDArray[np.float64]:
        """Exact standard deviations of :attr:`suffix` (the tree is mirror-symmetric)."""
        return self.prefix_std[::-1].copy()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "depth": self.depth,
            "sigma": self.sigma,
            "root": self.root,
            "levels": [lvl.tolist() for lvl in self.levels],
            "prefix": self.prefix.tolist(),
            "prefix_std": self.prefix_std.tolist(),
        }


@dataclass(frozen=True, eq=False)
class NoisyTree:
    """Released noisy node counts of a binary tree (the output of :meth:`NoisyBinaryTree.release`).

    Parameters
    ----------
    levels : sequence of arrays
        ``levels[ℓ]`` holds the 2^ℓ noisy counts of level ℓ = 0..depth; ``levels[0]`` is the
        exact total when ``root == "public"``.
    sigma : float
        Noise standard deviation on every noisy node.
    depth : int
    root : {"public", "noisy"}

    Notes
    -----
    Everything computed from a ``NoisyTree`` is post-processing of the release and costs no
    further privacy. A tree received from another party (e.g. an FDP site) can be rebuilt
    from its fields.
    """

    levels: tuple[NDArray[np.float64], ...]
    sigma: float
    depth: int
    root: RootMode = "public"

    def __post_init__(self) -> None:
        d = _check_depth(self.depth)
        object.__setattr__(self, "depth", d)
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        object.__setattr__(self, "root", _check_root(self.root))
        object.__setattr__(self, "levels", _check_levels(self.levels, d))

    @property
    def n_leaves(self) -> int:
        """2^depth."""
        return 1 << self.depth

    def dyadic_prefix(self) -> DyadicEstimate:
        """Prefix counts P_j = Σ leaves[:j], j = 0..2^D, from the canonical dyadic nodes.

        Returns
        -------
        DyadicEstimate
            ``estimate[j]`` is the sum of the popcount(j) noisy nodes that tile [0, j) (for
            j = 2^D: the root); ``std[j] = σ·sqrt(number of noisy nodes used)``, exact, since
            the noises are independent. ``estimate[0] == 0`` and, for a public root,
            ``estimate[-1] == n`` with std 0. No post-processing: see :meth:`consistent` for
            the more accurate BLUE.
        """
        est, used = _dyadic_prefix(self.levels, self.root == "noisy")
        return DyadicEstimate(est, self.sigma * np.sqrt(used.astype(np.float64)))

    def dyadic_suffix(self) -> DyadicEstimate:
        """Tail counts S_j = Σ leaves[j:], j = 0..2^D, from the canonical dyadic nodes.

        Mirror image of :meth:`dyadic_prefix`: S_j is the sum of the popcount(2^D − j) noisy
        nodes that tile [j, 2^D) (for j = 0: the root), ``std[j] = σ·sqrt(nodes used)``;
        ``estimate[-1] == 0``.
        """
        mirrored = [lvl[::-1] for lvl in self.levels]
        est, used = _dyadic_prefix(mirrored, self.root == "noisy")
        return DyadicEstimate(est[::-1].copy(), self.sigma * np.sqrt(used[::-1].astype(np.float64)))

    def consistent(self) -> ConsistentTree:
        """Honaker's optimal consistent estimate (BLUE) with exact prefix standard deviations.

        Returns
        -------
        ConsistentTree

        Notes
        -----
        Least squares over all node counts subject to every parent equalling the sum of its
        children (and the root equalling the exact n when public) — the best linear unbiased
        estimator by the Gauss–Markov theorem (Honaker 2015; Hay et al. 2010). Computed in
        O(2^D) by two passes: bottom-up, each node's subtree-only estimate is the
        inverse-variance mean of its own measurement and its children's estimates' sum;
        top-down, each parent's final estimate minus its children's sum is split equally
        between them. Proof and the variance formula: ``docs/proofs/honaker_tree.md``.
        """
        public = self.root == "public"
        est = _two_pass(self.levels, root_public=public)
        prefix, _ = _dyadic_prefix(est, root_noisy=not public)
        std = honaker_prefix_std(self.depth, self.sigma, self.root)
        return ConsistentTree(
            depth=self.depth,
            sigma=self.sigma,
            root=self.root,
            levels=tuple(_readonly(lvl) for lvl in est),
            prefix=_readonly(prefix),
            prefix_std=_readonly(std),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``NoisyTree(**d)`` rebuilds the tree."""
        return {
            "levels": [lvl.tolist() for lvl in self.levels],
            "sigma": self.sigma,
            "depth": self.depth,
            "root": self.root,
        }


# ---------------------------------------------------------------------------- mechanism
#: Largest node noise σ a zCDP tree is built with (the exact sampler's range, with margin).
_MAX_NODE_SIGMA = float(2**50)


@dataclass(frozen=True, slots=True)
class NoisyBinaryTree:
    """Gaussian noise on every node of a binary tree of counts over 2^D leaves.

    Parameters
    ----------
    depth : int
        D ≥ 1: 2^D leaves; level ℓ = 1..D has 2^ℓ nodes, all released with noise.
    sigma : float
        Standard deviation of the N(0, σ²) noise added to each noisy node.
    root : {"public", "noisy"}, default "public"
        Level 0 (the total count). ``"public"``: released exactly — use it when n is public
        (the median CI, ALGORITHMS.md §A2). ``"noisy"``: released with noise like every
        other node — use it when the total itself is private (per-group trees in FDP-Fair,
        §C, where group sizes are private).

    Notes
    -----
    Privacy (replace-one neighbours, ALGORITHMS.md §0). Each record falls in exactly one
    leaf, hence in exactly one node of every level. Replacing one record x by x' subtracts 1
    from the node containing x and adds 1 to the node containing x' on every level; the two
    coincide on the levels where x and x' share an ancestor. A level therefore changes by a
    vector of squared norm 0 or 2, and the released vector, made of L noisy levels, by
    squared norm at most 2L, attained when x and x' lie in different halves. So

        Δ₂ = sqrt(2L),  L = D (public root) or D + 1 (noisy root),

    and the release is the Gaussian mechanism on a Δ₂-sensitive query, which is
    ρ-zCDP with ρ = Δ₂²/(2σ²) = L/σ² (Bun & Steinke 2016, Prop. 1.6). Equivalently, each
    level (L2 sensitivity sqrt(2)) is (1/σ²)-zCDP and L levels compose to L/σ². Hence
    :meth:`for_zcdp` uses σ = sqrt(L/ρ) (ρ/L per level; for the public root this is the
    σ² = D/ρ of ALGORITHMS.md §A2) and :meth:`for_approx` uses the analytic Gaussian
    σ (Balle & Wang 2018) for Δ₂.

    As executed (``docs/floating_point.md``) the noise is the *exact discrete* Gaussian on
    the public lattice 2^-b·ℤ (:class:`~dpfair.mechanisms.discrete_gaussian.LatticeNoise`,
    b from σ and the public count bound 2^40 only): in lattice units every node is the
    integer 2^b·c plus N_ℤ(0, S), S = ⌈σ²4^b⌉ + 64. The node vector is an integer vector
    with L2 sensitivity 2^b·Δ₂, so (Canonne–Kamath–Steinke 2020; derivation in
    :mod:`dpfair.mechanisms.discrete_gaussian`) the release is (4^bΔ₂²/(2S))-zCDP
    ≤ Δ₂²/(2σ²) = :attr:`privacy` (an upper bound, S·4^-b ≥ σ²), and (ε, δ_c + ξ)-DP
    whenever the continuous Gaussian with σ is (ε, δ_c)-DP, ξ ≤ (2 + 8e^ε)·N·2e^{−2π²·64}
    (N noisy nodes): :meth:`for_approx` calibrates σ at δ_c = δ(1 − 2^-40) and
    :meth:`privacy_at` reports ε at that δ_c, so the (ε, δ) they state holds as executed.

    With a public root the root's sensitivity is 0 (n does not change under replacement),
    so releasing it exactly costs nothing. With a noisy root, for one tree under
    replace-one the root does not change either and sqrt(2D) would suffice; sqrt(2(D + 1))
    is the bound that also covers the case it is meant for — one tree per group, with
    group membership private: a record moving from group a to group b removes 1 from one
    node on each of the D + 1 levels of tree a and adds 1 on each level of tree b, a joint
    squared change of 2(D + 1). Thus a *pair* of noisy-root trees over disjoint groups,
    released together with the same σ, has joint sensitivity sqrt(2(D + 1)) and costs
    exactly :attr:`privacy` — once, not twice.

    Examples
    --------
    >>> import numpy as np
    >>> mech = NoisyBinaryTree.for_zcdp(depth=8, rho=0.5)
    >>> counts = leaf_counts(np.array([0.1, 0.5, 0.9]), bounds=(0.0, 1.0), depth=8)
    >>> tree = mech.release(counts, rng=0).consistent()
    >>> tree.prefix.shape, float(tree.prefix_std[-1])
    ((257,), 0.0)
    """

    depth: int
    sigma: float
    root: RootMode = "public"

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", _check_depth(self.depth))
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        object.__setattr__(self, "root", _check_root(self.root))

    # ------------------------------------------------------------------ calibration
    @classmethod
    def for_zcdp(cls, depth: int, rho: float, root: RootMode = "public") -> NoisyBinaryTree:
        """σ = sqrt(L/ρ), so that the whole tree is ρ-zCDP (ρ/L per noisy level)."""
        d = _check_depth(depth)
        r = check_positive("rho", rho)
        levels = _n_noisy_levels(d, _check_root(root))
        sigma = math.sqrt(levels / r)
        if sigma > _MAX_NODE_SIGMA:
            # The exact sampler draws variances up to 2^104 lattice units; beyond σ = 2^50
            # the tree's counts carry no information anyway (every interval is all of R).
            raise InvalidParameterError(
                f"rho={rho!r}: too small for a noisy binary tree of depth {d} (node noise "
                f"sigma = {sigma:.3g} > 2^50, beyond the exact sampler's range); the release "
                f"would say nothing. Use rho >= {levels / _MAX_NODE_SIGMA**2:.3g}."
            )
        return cls(depth=d, sigma=sigma, root=root)

    @classmethod
    def for_approx(
        cls, depth: int, epsilon: float, delta: float, root: RootMode = "public"
    ) -> NoisyBinaryTree:
        """Smallest σ for which the tree is (ε, δ)-DP (analytic Gaussian, Δ₂ = sqrt(2L))."""
        d = _check_depth(depth)
        sens = math.sqrt(2.0 * _n_noisy_levels(d, _check_root(root)))
        n_noisy = (1 << (d + 1)) - (1 if _check_root(root) == "noisy" else 2)
        sigma = discrete_gaussian_sigma(epsilon, delta, sens, n_noisy)
        return cls(depth=d, sigma=sigma, root=root)

    # ------------------------------------------------------------------ properties
    @property
    def n_leaves(self) -> int:
        """2^depth."""
        return 1 << self.depth

    @property
    def n_noisy_levels(self) -> int:
        """L: depth, plus one when the root is noisy."""
        return _n_noisy_levels(self.depth, self.root)

    @property
    def l2_sensitivity(self) -> float:
        """Δ₂ = sqrt(2L) of the whole released vector under replace-one neighbours."""
        return math.sqrt(2.0 * self.n_noisy_levels)

    @property
    def privacy(self) -> Budget:
        """ρ-zCDP with ρ = Δ₂²/(2σ²) = L/σ²."""
        return Budget.zcdp(self.l2_sensitivity**2 / (2.0 * self.sigma**2))

    def privacy_at(self, delta: float) -> Budget:
        """An (ε, δ)-DP guarantee of the executed (discrete Gaussian) release at this δ.

        ε is the analytic-Gaussian ε for Δ₂ at δ(1 − 2^-40); the discrete Gaussian's slack
        (class notes) fits in the remaining δ·2^-40.
        """
        return discrete_gaussian_privacy_at(
            self.sigma, self.l2_sensitivity, delta, self.n_noisy_nodes
        )

    @property
    def n_noisy_nodes(self) -> int:
        """Number of noisy nodes, 2^{D+1} − 2 (public root) or 2^{D+1} − 1 (noisy root)."""
        return (1 << (self.depth + 1)) - (1 if self.root == "noisy" else 2)

    @property
    def noise(self) -> LatticeNoise:
        """The exact discrete Gaussian noise added to every noisy node (public parameters)."""
        return LatticeNoise.for_sigma(self.sigma, _COUNT_MAGNITUDE + 64.0 * self.sigma)

    def prefix_std(self) -> NDArray[np.float64]:
        """Exact std of the consistent prefix estimates (data-independent)."""
        return honaker_prefix_std(self.depth, self.sigma, self.root)

    # ------------------------------------------------------------------ release
    def release(self, leaf_counts: ArrayLike, rng: RandomLike = None) -> NoisyTree:
        """Add independent N(0, σ²) noise to every noisy node of the tree over ``leaf_counts``.

        Parameters
        ----------
        leaf_counts : array-like of shape (2^D,)
            Non-negative integer counts, e.g. from :func:`leaf_counts`.
        rng : None, int, SeedSequence or Generator
            Source of the noise (see :func:`dpfair._rng.as_generator`).

        Returns
        -------
        NoisyTree
            Noise is drawn in one call, in node order level 0 (if noisy), 1, …, D.

        Notes
        -----
        Floating point: every released node is c + Z exactly, Z an exact discrete Gaussian
        draw on a public lattice (:attr:`noise`), so its law does not depend on the data
        beyond the integer count c. Running time: fixed work for D (public) plus the
        sampler's rejection rounds, whose number depends on the random draws only.
        """
        counts = _check_leaf_counts(leaf_counts, self.depth)
        gen = as_generator(rng)
        exact = _build_levels(counts)
        first = 0 if self.root == "noisy" else 1
        n_noisy = (1 << (self.depth + 1)) - (1 << first)
        # Exact discrete Gaussian noise on the public lattice 2^-b·Z, then an exact sum with
        # the integer counts: the released values are c + Z exactly, no rounding that
        # depends on the data (THREATS.md rule 6). b is fixed by public numbers only
        # (counts up to 2^40 and σ), never by the (possibly private) total.
        noise = self.noise.sample(n_noisy, gen)
        levels: list[NDArray[np.float64]] = [exact[0].astype(np.float64)]
        offset = 0
        for ell in range(first, self.depth + 1):
            size = 1 << ell
            noisy = exact[ell] + noise[offset : offset + size]
            offset += size
            if ell == 0:
                levels[0] = noisy
            else:
                levels.append(noisy)
        return NoisyTree(levels=tuple(levels), sigma=self.sigma, depth=self.depth, root=self.root)

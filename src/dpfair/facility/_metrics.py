r"""Welfare and fairness metrics of a facility location (paper 000, §2.3 and §4).

Notation: agents x_1 ≤ … ≤ x_n (sorted), median index k (1-based) and optimum T = x_k.

Even n
------
The optimal set is [x_{n/2}, x_{n/2+1}] (Prop. 2.3). dpfair uses the **lower median**
k = ⌈n/2⌉ = n/2 by default (for odd n, k = ⌈n/2⌉ is the median); ``median="upper"``
selects k = n/2 + 1. SWDIFF does not depend on this choice (every optimal point has the
same welfare), FAIR and the mechanism's loss do.

Closed forms (generalising Thms 4.1 and 4.3 to any n and either median)
----------------------------------------------------------------------
* FAIR(D, ℓ) = max_i LOSS_i = |T − ℓ| (Thm 4.1): every agent on the far side of T from ℓ
  (x_k itself, at least) loses exactly |T − ℓ|, and no agent loses more (triangle
  inequality).
* SWDIFF(D, ℓ) = w·|T − ℓ| + 2 Σ_{j ∈ C(D, ℓ)} |x_j − ℓ| with the crossed set
  C = {j < k : x_j ∈ [ℓ, T]} for ℓ < T and {j > k : x_j ∈ [T, ℓ]} for ℓ > T (Def. 4.2), and
  weight w = n − 2k + 2 left of T, w = 2k − n right of T. For odd n, w = 1 on both sides
  (Thm 4.3). Derivation for ℓ < T, r = T − ℓ: each agent contributes
  |x_i − ℓ| − |x_i − T|, which is +r for x_i ≥ T, −r for x_i ≤ ℓ and −r + 2(x_i − ℓ) in
  between; with t ties at T among j < k there are n − k + 1 + t agents at or right of T
  and k − 1 − t left of it, which gives (n − 2k + 2)·r + 2 Σ_{j<k, ℓ ≤ x_j ≤ T}(x_j − ℓ).
  The right side is the mirror image.

The closed forms are evaluated in coordinates centred at T, with prefix sums of the
distances y_j = |x_j − T| ordered outwards from T, so that a tiny SWDIFF (1e-10 at
n = 10^7) is not lost to cancellation between two sums of n terms.

Percentile loss (Def. 7.3) and widened loss (Def. 7.4)
-----------------------------------------------------
With c(a) = #{i : x_i ≤ a} and c⁻(a) = #{i : x_i < a},

.. math:: q(D, a) = \min\{\mathrm{cap},\ \max(0,\ k - c(a),\ c^-(a) + 1 - k)\},
          \qquad \mathrm{cap} = \min(k, n + 1 - k).

For odd n (and the lower median of even n) this is Def. 7.3 verbatim, whose "otherwise"
branch is ⌈n/2⌉ = cap; the cap only binds right of x_n for even n. q is non-increasing
left of T and non-decreasing right of it, so the widened loss
p_α(D, ℓ) = min_{|a − ℓ| ≤ αm} q(D, a) is q at the point of [ℓ − αm, ℓ + αm] nearest to T.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._validation import check_finite_1d, check_interval_bounds

__all__ = [
    "MedianChoice",
    "crossed_agents",
    "fair",
    "loss_vector",
    "optimal_location",
    "percentile_loss",
    "social_welfare",
    "swdiff",
    "utilities",
    "widened_loss",
]

MedianChoice = Literal["lower", "upper"]
Method = Literal["closed_form", "definition"]
_METHODS = ("closed_form", "definition")


# --------------------------------------------------------------------------- helpers
def check_median(median: Any) -> MedianChoice:
    """Validate the ``median`` choice."""
    if median == "lower":
        return "lower"
    if median == "upper":
        return "upper"
    raise InvalidParameterError(
        f"median={median!r}: expected 'lower' or 'upper' (which end of the optimal "
        "interval [x_(n/2), x_(n/2+1)] to use when n is even)."
    )


def _check_method(method: Any) -> Method:
    if method == "closed_form":
        return "closed_form"
    if method == "definition":
        return "definition"
    raise InvalidParameterError(f"method={method!r}: expected one of {_METHODS}.")


def median_index(n: int, median: MedianChoice = "lower") -> int:
    """1-based index k of the optimum T = x_(k): ⌈n/2⌉ (lower) or ⌊n/2⌋ + 1 (upper)."""
    return (n + 1) // 2 if median == "lower" else n // 2 + 1


def loss_cap(n: int, k: int) -> int:
    """Largest value of the percentile loss: min(k, n + 1 − k) (= ⌈n/2⌉ for odd n)."""
    return min(k, n + 1 - k)


def _locations(name: str, loc: ArrayLike) -> tuple[NDArray[np.float64], bool]:
    arr = np.asarray(loc, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"{name}: must be finite (got NaN or inf).")
    return np.atleast_1d(arr).ravel(), arr.ndim == 0


def _scalar_or_array(values: NDArray[Any], scalar: bool) -> Any:
    if scalar:
        return values[0].item()
    return values


def _per_location(
    name: str,
    loc: ArrayLike,
    how: Method,
    closed_form: Callable[[NDArray[np.float64]], NDArray[Any]],
    definition: Callable[[NDArray[np.float64]], NDArray[Any]],
) -> Any:
    """Evaluate a metric at the location(s) ``loc`` by the chosen method, in ``loc``'s shape.

    ``closed_form`` and ``definition`` map the flattened, validated locations to one value
    each; a scalar ``loc`` gives a Python scalar, an array one an array of its shape.
    """
    locs, scalar = _locations(name, loc)
    out = closed_form(locs) if how == "closed_form" else definition(locs)
    return _scalar_or_array(out if scalar else out.reshape(np.shape(loc)), scalar)


@dataclass(frozen=True, eq=False)
class Profile:
    """Sorted data seen from the optimum: everything the closed forms need, in O(n).

    Attributes
    ----------
    xs : sorted locations; n, k (1-based median index), optimum T = xs[k − 1].
    yl, yr : distances T − x_j for j < k and x_j − T for j > k, each ascending (outwards).
    cl, cr : prefix sums of yl, yr with a leading 0.
    w_left, w_right : SWDIFF weights of |T − ℓ| on each side (1 and 1 for odd n).
    """

    xs: NDArray[np.float64]
    n: int
    k: int
    optimum: float
    yl: NDArray[np.float64]
    yr: NDArray[np.float64]
    cl: NDArray[np.float64]
    cr: NDArray[np.float64]
    w_left: int
    w_right: int

    @classmethod
    def from_sorted(cls, xs: NDArray[np.float64], median: MedianChoice = "lower") -> Profile:
        """Build from already sorted, validated data."""
        n = int(xs.size)
        k = median_index(n, median)
        t = float(xs[k - 1])
        yl = t - xs[: k - 1][::-1]
        yr = xs[k:] - t
        np.maximum(yl, 0.0, out=yl)
        np.maximum(yr, 0.0, out=yr)
        cl = np.concatenate(([0.0], np.cumsum(yl)))
        cr = np.concatenate(([0.0], np.cumsum(yr)))
        return cls(xs, n, k, t, yl, yr, cl, cr, n - 2 * k + 2, 2 * k - n)

    @classmethod
    def from_data(cls, x: ArrayLike, median: MedianChoice = "lower", name: str = "x") -> Profile:
        """Validate, sort and build."""
        arr = check_finite_1d(name, x)
        arr.sort()
        return cls.from_sorted(arr, check_median(median))

    # ------------------------------------------------------------------ sides
    def side(self, side: str) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
        """(distances, prefix sums, weight) of the left or right side."""
        if side == "left":
            return self.yl, self.cl, self.w_left
        return self.yr, self.cr, self.w_right

    def swdiff_side(self, side: str, r: ArrayLike) -> NDArray[np.float64]:
        """SWDIFF at distance r ≥ 0 from T on one side (closed form, Thm 4.3)."""
        y, cum, w = self.side(side)
        rr = np.asarray(r, dtype=np.float64)
        c = np.searchsorted(y, rr, side="right")
        return np.asarray(w * rr + 2.0 * (c * rr - cum[c]), dtype=np.float64)

    def swdiff_knots(
        self, side: str
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """SWDIFF on one side as a piecewise-linear function of r = |ℓ − T|.

        Returns ``(knots, slopes, intercepts)``: on ``[knots[i], knots[i+1])`` (the last
        segment unbounded) SWDIFF = slopes[i]·r + intercepts[i].
        """
        knots, slopes, icpts, _ = self._knot_table(side)
        return knots, slopes, icpts

    def _knot_table(
        self, side: str
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        cache = self.__dict__.setdefault("_knot_cache", {})
        if side not in cache:
            y, cum, w = self.side(side)
            knots = np.concatenate(([0.0], y))
            slopes = w + 2.0 * np.arange(knots.size, dtype=np.float64)
            icpts = -2.0 * cum
            values = slopes * knots + icpts  # SWDIFF at the knots, non-decreasing
            values[0] = 0.0
            np.maximum.accumulate(values, out=values)  # remove rounding wiggles
            cache[side] = (knots, slopes, icpts, values)
        out: tuple[
            NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]
        ] = cache[side]
        return out

    def swdiff_inverse(self, side: str, s: ArrayLike) -> NDArray[np.float64]:
        """sup{r ≥ 0 : SWDIFF(side, r) ≤ s} for s ≥ 0 (``inf`` if never exceeded)."""
        knots, slopes, icpts, values = self._knot_table(side)
        ss = np.asarray(s, dtype=np.float64)
        j = np.searchsorted(values, ss, side="right") - 1
        j = np.clip(j, 0, knots.size - 1)
        a = slopes[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(a > 0, (ss - icpts[j]) / a, np.inf)
        # stay inside the segment (rounding) and never below its start
        nxt = np.concatenate((knots[1:], [np.inf]))[j]
        r = np.clip(r, knots[j], nxt)
        # a flat segment (slope 0) extends to the next knot, whose value is still ≤ s;
        # searchsorted already moved past it, so the clip above is exact.
        return np.asarray(r, dtype=np.float64)

    def swdiff(self, loc: NDArray[np.float64]) -> NDArray[np.float64]:
        """SWDIFF at each location (closed form)."""
        d = loc - self.optimum
        out = np.where(
            d < 0,
            self.swdiff_side("left", np.maximum(-d, 0.0)),
            self.swdiff_side("right", np.maximum(d, 0.0)),
        )
        return np.asarray(out, dtype=np.float64)

    def percentile_loss(self, a: NDArray[np.float64]) -> NDArray[np.int64]:
        """q(D, a) by the count formula (module docstring)."""
        c = np.searchsorted(self.xs, a, side="right")
        cm = np.searchsorted(self.xs, a, side="left")
        k = self.k
        q = np.maximum(np.maximum(k - c, cm + 1 - k), 0)
        return np.minimum(q, loss_cap(self.n, k)).astype(np.int64)

    def widened_loss(self, loc: NDArray[np.float64], band: float) -> NDArray[np.int64]:
        """p_α(D, ℓ) with αm = ``band``: q at the point of [ℓ − band, ℓ + band] nearest T."""
        t = self.optimum
        a = np.where(loc + band < t, loc + band, np.where(loc - band > t, loc - band, t))
        return self.percentile_loss(a)


# --------------------------------------------------------------------------- public API
def optimal_location(x: ArrayLike, *, median: MedianChoice = "lower") -> float:
    """The welfare-optimal facility location T(D): the median of the agents' locations.

    Parameters
    ----------
    x : array-like of shape (n,)
        Agent locations (finite).
    median : {"lower", "upper"}, default="lower"
        For even n every point of [x_(n/2), x_(n/2+1)] is optimal (Prop. 2.3); dpfair uses
        the lower end by default, as the paper's index ⌈n/2⌉ does.

    Returns
    -------
    float
        x_(k) with k = ⌈n/2⌉ (lower) or n/2 + 1 (upper, even n).

    Notes
    -----
    This is the *non-private* optimum, for analysts who hold the data; releasing it is not
    differentially private.
    """
    return Profile.from_data(x, check_median(median)).optimum


def utilities(x: ArrayLike, loc: float) -> NDArray[np.float64]:
    """Agent utilities u_i(ℓ) = −|x_i − ℓ| (in the order of ``x``)."""
    arr = check_finite_1d("x", x)
    locs, scalar = _locations("loc", loc)
    if not scalar:
        raise InvalidParameterError("loc: expected one location (a scalar).")
    return np.asarray(-np.abs(arr - locs[0]), dtype=np.float64)


def social_welfare(x: ArrayLike, loc: ArrayLike) -> Any:
    """Social welfare s(D, ℓ) = Σ_i u_i(ℓ) = −Σ_i |x_i − ℓ|; vectorised over ``loc``."""
    arr = check_finite_1d("x", x)
    locs, scalar = _locations("loc", loc)
    out = np.array([-float(np.sum(np.abs(arr - v))) for v in locs])
    return _scalar_or_array(out.reshape(np.shape(loc)) if not scalar else out, scalar)


def loss_vector(x: ArrayLike, loc: float, *, median: MedianChoice = "lower") -> NDArray[np.float64]:
    """LOSS(D, ℓ) = u(D, T(D)) − u(D, ℓ): each agent's utility loss (order of ``x``).

    Def. 2.6 with the deterministic optimum T of :func:`optimal_location`.
    """
    arr = check_finite_1d("x", x)
    t = optimal_location(arr, median=median)
    locs, scalar = _locations("loc", loc)
    if not scalar:
        raise InvalidParameterError("loc: expected one location (a scalar).")
    return np.asarray(np.abs(arr - locs[0]) - np.abs(arr - t), dtype=np.float64)


def fair(
    x: ArrayLike, loc: ArrayLike, *, median: MedianChoice = "lower", method: Method = "closed_form"
) -> Any:
    """FAIR(D, ℓ): the largest individual utility loss of moving the facility from T to ℓ.

    Parameters
    ----------
    x : array-like of shape (n,)
        Agent locations.
    loc : float or array-like
        Proposed location(s); the result has the same shape.
    median : {"lower", "upper"}, default="lower"
        Optimum used for even n (see :func:`optimal_location`).
    method : {"closed_form", "definition"}, default="closed_form"
        ``"closed_form"``: |T − ℓ| (Thm 4.1), O(1) per location after the median.
        ``"definition"``: max_i LOSS_i (Def. 2.6), O(n) per location.
    """
    how = _check_method(method)
    prof = Profile.from_data(x, check_median(median))
    xs, t = prof.xs, prof.optimum

    def definition(locs: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.array([float(np.max(np.abs(xs - v) - np.abs(xs - t))) for v in locs])

    return _per_location("loc", loc, how, lambda locs: np.abs(t - locs), definition)


def swdiff(
    x: ArrayLike, loc: ArrayLike, *, median: MedianChoice = "lower", method: Method = "closed_form"
) -> Any:
    """SWDIFF(D, ℓ) = s(D, T(D)) − s(D, ℓ): the welfare lost by placing the facility at ℓ.

    Parameters
    ----------
    x : array-like of shape (n,)
        Agent locations.
    loc : float or array-like
        Proposed location(s); the result has the same shape.
    median : {"lower", "upper"}, default="lower"
        Which optimum the closed form is written around (the value does not depend on it).
    method : {"closed_form", "definition"}, default="closed_form"
        ``"closed_form"``: w·|T − ℓ| + 2 Σ_{j∈C} |x_j − ℓ| (Thm 4.3, generalised to even
        n in the module docstring), O(log n) per location after an O(n log n) set-up.
        ``"definition"``: Σ_i |x_i − ℓ| − Σ_i |x_i − T| (Def. 2.6), O(n) per location.
    """
    how = _check_method(method)
    prof = Profile.from_data(x, check_median(median))

    def definition(locs: NDArray[np.float64]) -> NDArray[np.float64]:
        xs = prof.xs
        base = float(np.sum(np.abs(xs - prof.optimum)))
        return np.array([float(np.sum(np.abs(xs - v))) - base for v in locs])

    return _per_location("loc", loc, how, prof.swdiff, definition)


def crossed_agents(x: ArrayLike, loc: float, *, median: MedianChoice = "lower") -> NDArray[np.intp]:
    """Indices (into ``x``) of the crossed agents C(D, ℓ) of Def. 4.2.

    For ℓ < T: the agents ranked below the median (sorted index j < k) located in [ℓ, T];
    for ℓ > T: those ranked above it located in [T, ℓ]; empty for ℓ = T. Ties are ranked
    by their position in ``x`` (a stable sort), which is how the paper's sorted indexing
    breaks them. Returned in sorted order of location.
    """
    arr = check_finite_1d("x", x)
    locs, scalar = _locations("loc", loc)
    if not scalar:
        raise InvalidParameterError("loc: expected one location (a scalar).")
    ell = float(locs[0])
    order = np.argsort(arr, kind="stable")
    xs = arr[order]
    k = median_index(arr.size, check_median(median))
    t = float(xs[k - 1])
    ranks = np.arange(1, arr.size + 1)
    if ell < t:
        mask = (ranks < k) & (xs >= ell) & (xs <= t)
    elif ell > t:
        mask = (ranks > k) & (xs >= t) & (xs <= ell)
    else:
        mask = np.zeros(arr.size, dtype=bool)
    return np.asarray(order[mask], dtype=np.intp)


def _percentile_loss_definition(xs: NDArray[np.float64], k: int, a: float) -> int:
    """Def. 7.3 literally (with ⌈n/2⌉ → k and the 'otherwise' value → cap)."""
    n = xs.size
    t = xs[k - 1]
    idx = np.arange(1, n + 1)
    if xs[0] <= a <= t:
        cand = idx[xs <= a]  # i with a ∈ [x_i, T]
        return int(np.min(np.abs(k - cand)))
    if t < a <= xs[-1]:
        cand = idx[xs >= a]  # i with a ∈ [T, x_i]
        return int(np.min(np.abs(k - cand)))
    return loss_cap(n, k)


def percentile_loss(
    x: ArrayLike, a: ArrayLike, *, median: MedianChoice = "lower", method: Method = "closed_form"
) -> Any:
    """Percentile loss q(D, a) of Def. 7.3: how many agents lie between a and the median.

    ``method="closed_form"`` uses the count formula of the module docstring (O(log n) per
    point); ``"definition"`` evaluates Def. 7.3 literally (O(n) per point).
    """
    how = _check_method(method)
    prof = Profile.from_data(x, check_median(median))

    def definition(pts: NDArray[np.float64]) -> NDArray[np.int64]:
        return np.array([_percentile_loss_definition(prof.xs, prof.k, float(v)) for v in pts])

    return _per_location("a", a, how, prof.percentile_loss, definition)


def widened_loss(
    x: ArrayLike,
    loc: ArrayLike,
    *,
    widening: float,
    domain: tuple[float, float],
    median: MedianChoice = "lower",
    method: Method = "closed_form",
) -> Any:
    """Widened percentile loss p_α(D, ℓ) = min_{a ∈ V, |a − ℓ| ≤ αm} q(D, a) (Def. 7.4).

    Parameters
    ----------
    x : array-like of shape (n,)
        Agent locations.
    loc : float or array-like
        Location(s) ℓ.
    widening : float
        α ≥ 0; the band half-width is αm with m = hi − lo.
    domain : (lo, hi)
        The public domain V.
    median : {"lower", "upper"}, default="lower"
    method : {"closed_form", "definition"}, default="closed_form"
        ``"closed_form"``: q at the point of [ℓ − αm, ℓ + αm] nearest to T (q is
        unimodal around T). ``"definition"``: the minimum of q over the interval ∩ V,
        found exactly by evaluating q at the interval's ends and at every data point
        inside it (q is constant between data points).
    """
    how = _check_method(method)
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    alpha = float(widening)
    if not (np.isfinite(alpha) and alpha >= 0):
        raise InvalidParameterError(f"widening={widening!r}: must be a finite number >= 0.")
    band = alpha * (hi - lo)
    prof = Profile.from_data(x, check_median(median))

    def definition(locs: NDArray[np.float64]) -> NDArray[np.int64]:
        xs, k = prof.xs, prof.k
        q_at_data = np.array([_percentile_loss_definition(xs, k, float(v)) for v in xs])
        vals = []
        for v in locs:
            a0, a1 = max(lo, v - band), min(hi, v + band)
            if a0 > a1:  # ℓ far outside V: the band misses V, use it unrestricted
                a0, a1 = v - band, v + band
            cands = [
                _percentile_loss_definition(xs, k, a0),
                _percentile_loss_definition(xs, k, a1),
            ]
            inside = (xs >= a0) & (xs <= a1)
            if inside.any():
                cands.append(int(q_at_data[inside].min()))
            vals.append(min(cands))
        return np.array(vals, dtype=np.int64)

    return _per_location("loc", loc, how, lambda locs: prof.widened_loss(locs, band), definition)

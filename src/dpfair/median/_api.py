"""Public entry points: :func:`confidence_interval` and :func:`nonprivate_interval`."""

from __future__ import annotations

from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike

from dpfair._errors import InsufficientDataError, InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import (
    check_finite_1d,
    check_in_open_interval,
    check_interval_bounds,
    check_positive,
)
from dpfair.median._binsearch import binsearch_interval, grid_depth
from dpfair.median._cdf import cdf_interval
from dpfair.median._expmech import expmech_interval
from dpfair.median._ranks import nonprivate_ranks
from dpfair.median._result import DPCdf, MedianInterval, NonPrivateInterval
from dpfair.privacy import Budget

__all__ = ["DEFAULT_GRANULARITY_FRACTION", "METHODS", "confidence_interval",
           "nonprivate_interval"]

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
        clipped into R (on a copy) — this leaves the rank of any median inside R unchanged,
        which is all the coverage argument needs. Required: never taken from the data.
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

    Examples
    --------
    >>> import numpy as np, dpfair
    >>> x = np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 1000)
    >>> r = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), rng=1)
    >>> r.low < 1.5 < r.high
    True
    """
    r = check_positive("rho", rho)
    a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
    lo, hi = check_interval_bounds("bounds", bounds, example="(-5.0, 15.0)")
    if method not in METHODS:
        raise InvalidParameterError(
            f"method={method!r}: unknown method; choose one of {', '.join(METHODS)}."
        )
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
    if method != "expmech" and grid_depth(width, theta) > _MAX_DEPTH:
        raise InvalidParameterError(
            f"granularity={theta:g}: needs more than 2^{_MAX_DEPTH} bins over the range "
            f"{(lo, hi)}; use a coarser granularity."
        )
    data = check_finite_1d("x", x)
    n = data.size
    nonprivate_ranks(n, a)  # raises if no interval at all can have this coverage
    np.clip(data, lo, hi, out=data)  # our own copy: the caller's array is untouched
    gen = as_generator(rng)

    cdf: DPCdf | None = None
    diagnostics: dict[str, Any]
    if method == "expmech":
        data.sort()
        low, high, spent, diagnostics = expmech_interval(data, r, (lo, hi), a, theta, gen)
    elif method == "binsearch":
        data.sort()
        low, high, spent, diagnostics = binsearch_interval(data, r, (lo, hi), a, theta, gen)
    elif method == "cdf":
        depth = grid_depth(width, theta)
        low, high, spent, diagnostics, cdf = cdf_interval(data, r, (lo, hi), a, depth, gen)
    else:
        low, high, spent, diagnostics = _binsearch_then_cdf(data, r, (lo, hi), a, theta, gen)
    return MedianInterval(
        low=low,
        high=high,
        estimate=0.5 * (low + high),
        method=str(method),
        alpha=a,
        n=n,
        bounds=(lo, hi),
        granularity=theta,
        privacy=spent,
        diagnostics=diagnostics,
        cdf=cdf,
    )


def _binsearch_then_cdf(
    data: np.ndarray,
    rho: float,
    bounds: tuple[float, float],
    alpha: float,
    theta: float,
    gen: np.random.Generator,
) -> tuple[float, float, Budget, dict[str, Any]]:
    """BinSearch+CDF (paper 004, §3): ρ/4 and α/4 to localise, 3ρ/4 and 3α/4 to refine.

    Coverage: P(miss) ≤ P(med ∉ R₂) + P(med ∈ R₂, stage 2 misses) ≤ α/4 + 3α/4, where the
    second term uses the envelope thresholds of :mod:`dpfair.median._cdf` because R₂ is
    data-dependent. Privacy: ρ/4 + 3ρ/4 = ρ (zCDP composition). Stage 2 keeps the depth
    of the full-range grid (public), so its bins are finer than θ.
    """
    lo, hi = bounds
    data.sort()
    try:
        l1, u1, spent1, diag1 = binsearch_interval(data, rho / 4.0, bounds, alpha / 4.0,
                                                   theta, gen)
    except InsufficientDataError as err:
        raise InsufficientDataError(
            f"method='binsearch_cdf': its localisation stage (rho/4={rho / 4:g}, "
            f"alpha/4={alpha / 4:g}) has no valid target rank for n={data.size}. Increase n, "
            "rho or alpha, or use method='cdf'."
        ) from err
    r_lo, r_hi = min(l1, u1), max(l1, u1)
    if r_hi - r_lo < theta:  # degenerate localisation: widen (a superset stays valid)
        r_lo, r_hi = max(lo, r_lo - theta), min(hi, r_hi + theta)
    depth = grid_depth(hi - lo, theta)
    clipped = np.clip(data, r_lo, r_hi)
    low, high, spent2, diag2, _ = cdf_interval(clipped, 3.0 * rho / 4.0, (r_lo, r_hi),
                                               3.0 * alpha / 4.0, depth, gen, envelope=True)
    diagnostics = {"stage1_interval": (l1, u1), "stage1": diag1, "stage2": diag2}
    return low, high, spent1 + spent2, diagnostics

r"""Data-set families of paper 000 (§6), their worst cases and the lower-bound pairs (§7.3).

* CTM (Def. 6.1): gaps shrink towards the median on both sides — :func:`is_ctm`.
* SPM_λ (Def. 6.4): within Kolmogorov–Smirnov distance λ of a law whose density is
  single-peaked at its median — samplers (:func:`triangular_law`,
  :func:`truncated_normal_law`, :func:`single_peaked_law`), :func:`ks_distance`, and the
  smallest λ by linear programming (:func:`spm_lambda`).
* Worst cases for P(p_α ≤ k): :func:`ctm_worst_case` (Lemma 7.8) and
  :func:`spm_worst_case` (Lemmas 3.11 / 7.14).
* Lower-bound pairs: :func:`impossibility_pair` (Thm 5.1), :func:`fair_lower_bound_pair`
  (D_0 / D_γ of Thm 7.21) and :func:`spm_lower_bound_pair` (D_1 / D_2 of Thm 7.24).

Even n: the paper assumes n odd. With median index k_med (⌈n/2⌉ for the lower median),
the worst case D_k^CTM has J = k_med − 1 − k equally spaced agents and the rest at the
median's end; for odd n this is the paper's ⌊n/2⌋ − k. For the upper median the data set
is mirrored (median at lo), because then the side with fewer agents is the right one.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, sparse, special

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_finite_1d, check_interval_bounds, check_positive
from dpfair.facility._metrics import MedianChoice, check_median, median_index
from dpfair.mechanisms import PiecewiseConstantLaw

__all__ = [
    "CustomSinglePeakedLaw",
    "LowerBoundPair",
    "SPMFit",
    "SinglePeakedLaw",
    "TriangularLaw",
    "TruncatedNormalLaw",
    "change_one_distance",
    "ctm_worst_case",
    "fair_lower_bound_pair",
    "impossibility_pair",
    "is_ctm",
    "ks_distance",
    "single_peaked_law",
    "spm_lambda",
    "spm_lower_bound_pair",
    "spm_worst_case",
    "triangular_law",
    "truncated_normal_law",
]


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InvalidParameterError(f"{name}={value!r}: expected an integer >= {low}.")
    return int(value)


# --------------------------------------------------------------------------- CTM
def is_ctm(
    x: ArrayLike, *, median: MedianChoice = "lower", rtol: float = 1e-9
) -> bool:
    """Is the data set collapsing towards the median (Def. 6.1)?

    With sorted x and median index k: the gaps x_{i+1} − x_i are non-increasing for
    i = 1, …, k − 1 (left of the median) and x_i − x_{i−1} non-decreasing for
    i = k + 1, …, n (right of it).

    Parameters
    ----------
    x : array-like of shape (n,)
    median : {"lower", "upper"}, default="lower"
    rtol : float, default=1e-9
        A gap may exceed the one it must not exceed by ``rtol·(x_(n) − x_(1))`` (equal
        spacings computed in floating point differ in the last bits).
    """
    xs = np.sort(check_finite_1d("x", x))
    n = xs.size
    k = median_index(n, check_median(median))
    tol = float(rtol) * float(xs[-1] - xs[0])
    gaps = np.diff(xs)
    left = gaps[: k - 1]  # x_{i+1} - x_i, i = 1..k-1
    right = gaps[k - 1 :]  # x_i - x_{i-1}, i = k+1..n
    ok_left = bool(np.all(left[1:] <= left[:-1] + tol)) if left.size > 1 else True
    ok_right = bool(np.all(right[:-1] <= right[1:] + tol)) if right.size > 1 else True
    return ok_left and ok_right


# --------------------------------------------------------------------------- laws
@dataclass(frozen=True, eq=False)
class SinglePeakedLaw(ABC):
    """A law on an interval whose density is single-peaked at its median (class 𝒫, §6.2).

    Built by :func:`triangular_law`, :func:`truncated_normal_law` or
    :func:`single_peaked_law`. Samples are exact; instances pickle (the custom law if its
    density function does).

    Attributes
    ----------
    support : (a, b)
    peak : float
        The peak, which is also the median.
    """

    support: tuple[float, float]
    peak: float

    name: ClassVar[str] = "single_peaked"

    @property
    def median(self) -> float:
        """The median (= the peak)."""
        return self.peak

    @abstractmethod
    def _cdf_inside(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """cdf on the support."""

    @abstractmethod
    def _pdf_sides(
        self, t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """(left formula, right formula, density at the peak) on the support."""

    @abstractmethod
    def _draw(self, n: int, gen: np.random.Generator) -> NDArray[np.float64]:
        """n exact draws."""

    def _params(self) -> dict[str, float]:
        return {}

    def pdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Density (at the peak: the larger one-sided limit)."""
        arr = np.asarray(t, dtype=np.float64)
        a, b = self.support
        left, right, top = self._pdf_sides(np.clip(arr, a, b))
        out = np.where(arr < self.peak, left, np.where(arr > self.peak, right, top))
        return np.asarray(np.where((arr >= a) & (arr <= b), out, 0.0), dtype=np.float64)

    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Distribution function."""
        arr = np.asarray(t, dtype=np.float64)
        a, b = self.support
        out = self._cdf_inside(np.clip(arr, a, b))
        return np.clip(np.where(arr < a, 0.0, np.where(arr >= b, 1.0, out)), 0.0, 1.0)

    def sample(self, n: int, rng: RandomLike = None) -> NDArray[np.float64]:
        """``n`` independent draws (exact)."""
        size = _check_int("n", n, 1)
        return self._draw(size, as_generator(rng))

    def to_dict(self) -> dict[str, Any]:
        """Description (JSON-ready)."""
        return {"name": self.name, "support": list(self.support), "peak": self.peak,
                **self._params()}


def _support(domain: tuple[float, float], support: tuple[float, float] | None,
             peak: float | None) -> tuple[float, float, float]:
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    a, b = (lo, hi) if support is None else check_interval_bounds("support", support)
    if a < lo or b > hi:
        raise InvalidParameterError(
            f"support=({a:g}, {b:g}): must lie inside domain=({lo:g}, {hi:g})."
        )
    c = 0.5 * (a + b) if peak is None else float(peak)
    if not a < c < b:
        raise InvalidParameterError(
            f"peak={peak!r}: must lie strictly inside the support ({a:g}, {b:g})."
        )
    return a, b, c


@dataclass(frozen=True, eq=False)
class TriangularLaw(SinglePeakedLaw):
    """Two right triangles of mass 1/2 each, meeting at the peak (see :func:`triangular_law`)."""

    name: ClassVar[str] = "triangular"

    def _cdf_inside(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        (a, b), c = self.support, self.peak
        left = 0.5 * ((t - a) / (c - a)) ** 2
        right = 1.0 - 0.5 * ((b - t) / (b - c)) ** 2
        return np.asarray(np.where(t <= c, left, right), dtype=np.float64)

    def _pdf_sides(
        self, t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        (a, b), c = self.support, self.peak
        return (t - a) / (c - a) ** 2, (b - t) / (b - c) ** 2, max(1 / (c - a), 1 / (b - c))

    def _draw(self, n: int, gen: np.random.Generator) -> NDArray[np.float64]:
        (a, b), c = self.support, self.peak
        u = gen.random(n)
        left = a + (c - a) * np.sqrt(2.0 * u)
        right = b - (b - c) * np.sqrt(2.0 * (1.0 - u))
        return np.clip(np.where(u <= 0.5, left, right), a, b)


@dataclass(frozen=True, eq=False)
class TruncatedNormalLaw(SinglePeakedLaw):
    """Normal(peak, scale²) on the support, each side re-weighted to mass 1/2."""

    scale: float = 1.0
    name: ClassVar[str] = "truncated_normal"

    def _tails(self) -> tuple[float, float]:
        (a, b), c, s = self.support, self.peak, self.scale
        return float(special.ndtr((a - c) / s)), float(special.ndtr((b - c) / s))

    def _params(self) -> dict[str, float]:
        return {"scale": self.scale}

    def _cdf_inside(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        pa, pb = self._tails()
        p = special.ndtr((t - self.peak) / self.scale)
        left = 0.5 * (p - pa) / (0.5 - pa)
        right = 0.5 + 0.5 * (p - 0.5) / (pb - 0.5)
        return np.asarray(np.where(t <= self.peak, left, right), dtype=np.float64)

    def _pdf_sides(
        self, t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        pa, pb = self._tails()
        s = self.scale
        phi = np.exp(-0.5 * ((t - self.peak) / s) ** 2) / (s * math.sqrt(2.0 * math.pi))
        top = 0.5 / (s * math.sqrt(2.0 * math.pi)) / min(0.5 - pa, pb - 0.5)
        return 0.5 * phi / (0.5 - pa), 0.5 * phi / (pb - 0.5), top

    def _draw(self, n: int, gen: np.random.Generator) -> NDArray[np.float64]:
        pa, pb = self._tails()
        u = gen.random(n)
        p = np.where(u <= 0.5, pa + 2.0 * u * (0.5 - pa), 0.5 + (2.0 * u - 1.0) * (pb - 0.5))
        a, b = self.support
        return np.clip(self.peak + self.scale * special.ndtri(p), a, b)


@dataclass(frozen=True, eq=False)
class CustomSinglePeakedLaw(SinglePeakedLaw):
    """A user density, each side normalised to 1/2 (see :func:`single_peaked_law`)."""

    density: Callable[[NDArray[np.float64]], ArrayLike] | None = field(default=None, repr=False)
    grid: int = 4096
    label: str = "custom"
    name: ClassVar[str] = "custom"

    def __post_init__(self) -> None:
        if self.density is None:
            raise InvalidParameterError("pdf=None: a density function is required.")
        (a, b), c = self.support, self.peak
        cells = _check_int("grid", self.grid, 16)
        g_left = np.linspace(a, c, cells + 1)
        g_right = np.linspace(c, b, cells + 1)
        fl, fr = self._f(g_left), self._f(g_right)
        finite = bool(np.all(np.isfinite(fl)) and np.all(np.isfinite(fr)))
        if not finite or fl.min() < 0 or fr.min() < 0:
            raise InvalidParameterError("pdf: must be finite and >= 0 on the support.")
        tol = 1e-12 * max(float(fl.max()), float(fr.max()), 1e-300)
        if np.any(np.diff(fl) < -tol) or np.any(np.diff(fr) > tol):
            raise InvalidParameterError(
                f"pdf: not single-peaked at peak={c:g}: it must be non-decreasing on "
                f"[{a:g}, {c:g}] and non-increasing on [{c:g}, {b:g}]."
            )
        cum_l = np.concatenate(([0.0], np.cumsum(0.5 * (fl[1:] + fl[:-1]) * np.diff(g_left))))
        cum_r = np.concatenate(([0.0], np.cumsum(0.5 * (fr[1:] + fr[:-1]) * np.diff(g_right))))
        mass_l, mass_r = float(cum_l[-1]), float(cum_r[-1])
        if mass_l <= 0 or mass_r <= 0:
            raise InvalidParameterError(
                "pdf: has no mass on one side of the peak; a single-peaked law with that "
                "peak as its median needs mass 1/2 on each side."
            )
        # envelope: left cells use the right-end value, right cells the left-end value;
        # side weights make each side carry 1/2 under the target law.
        env = np.concatenate((fl[1:] * 0.5 / mass_l, fr[:-1] * 0.5 / mass_r))
        edges = np.concatenate((g_left, g_right[1:]))
        with np.errstate(divide="ignore"):
            envelope = PiecewiseConstantLaw(edges, np.log(env))
        tables = {"g_left": g_left, "g_right": g_right, "cum_l": cum_l, "cum_r": cum_r,
                  "mass_l": mass_l, "mass_r": mass_r,
                  "top": max(0.5 * float(fl[-1]) / mass_l, 0.5 * float(fr[0]) / mass_r),
                  "envelope": envelope}
        object.__setattr__(self, "_tables", tables)

    def _f(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        assert self.density is not None
        return np.asarray(self.density(t), dtype=np.float64).reshape(np.shape(t))

    def _cdf_inside(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        tb = self._tables  # type: ignore[attr-defined]
        left = 0.5 * np.interp(t, tb["g_left"], tb["cum_l"]) / tb["mass_l"]
        right = 0.5 + 0.5 * np.interp(t, tb["g_right"], tb["cum_r"]) / tb["mass_r"]
        return np.asarray(np.where(t <= self.peak, left, right), dtype=np.float64)

    def _pdf_sides(
        self, t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        tb = self._tables  # type: ignore[attr-defined]
        ft = self._f(t)
        return 0.5 * ft / tb["mass_l"], 0.5 * ft / tb["mass_r"], float(tb["top"])

    def _draw(self, n: int, gen: np.random.Generator) -> NDArray[np.float64]:
        envelope: PiecewiseConstantLaw = self._tables["envelope"]  # type: ignore[attr-defined]
        out = np.empty(0)
        while out.size < n:
            need = n - out.size
            t = np.asarray(envelope.sample(size=int(need * 1.2) + 16, rng=gen))
            e = np.exp(envelope.logpdf(t) + envelope.log_norm)
            d = self.pdf(t)
            if np.any(d > e * (1 + 1e-9)):
                raise InvalidParameterError(
                    f"pdf: exceeds its monotone envelope near {float(t[np.argmax(d - e)]):g}; "
                    f"it is not single-peaked at peak={self.peak:g}."
                )
            keep = gen.random(t.size) * e < d
            out = np.concatenate((out, t[keep]))
        return out[:n]

    def to_dict(self) -> dict[str, Any]:
        """Description (JSON-ready)."""
        return {**super().to_dict(), "name": self.label}


def triangular_law(
    domain: tuple[float, float],
    *,
    peak: float | None = None,
    support: tuple[float, float] | None = None,
) -> SinglePeakedLaw:
    """Triangular density on ``support`` (default: the domain) peaked at its median.

    Each side is a right triangle carrying mass 1/2, so the peak is the median and the
    density is single-peaked there, as Def. 6.4 needs. With the peak in the middle of the
    support (the default) this is the usual symmetric triangular law; an off-centre peak
    gives a triangle with a step at the peak (the usual asymmetric triangular law is *not*
    single-peaked at its median, whose density keeps falling between mode and median).
    Sampled exactly by inversion.
    """
    a, b, c = _support(domain, support, peak)
    return TriangularLaw((a, b), c)


def truncated_normal_law(
    domain: tuple[float, float],
    *,
    peak: float | None = None,
    scale: float | None = None,
    support: tuple[float, float] | None = None,
) -> SinglePeakedLaw:
    """Normal(peak, scale²) truncated to ``support``, each side re-weighted to mass 1/2.

    The re-weighting makes ``peak`` the median, so the density is single-peaked at its
    median (Def. 6.4); when the support is symmetric about the peak it is exactly the
    usual truncated normal. ``scale`` defaults to a sixth of the support's width.
    Sampled exactly by inversion (``scipy.special.ndtri``).
    """
    a, b, c = _support(domain, support, peak)
    s = (b - a) / 6.0 if scale is None else check_positive("scale", scale)
    return TruncatedNormalLaw((a, b), c, s)


def single_peaked_law(
    pdf: Callable[[NDArray[np.float64]], ArrayLike],
    domain: tuple[float, float],
    *,
    peak: float,
    support: tuple[float, float] | None = None,
    grid: int = 4096,
    name: str = "custom",
) -> SinglePeakedLaw:
    """A law from a user-supplied density, non-decreasing up to ``peak`` and non-increasing after.

    Each side is normalised to mass 1/2 (so ``peak`` is the median, as Def. 6.4 needs);
    ``pdf`` need not be normalised. Sampling is exact rejection from a piecewise-constant
    envelope that monotonicity guarantees: on a grid cell left of the peak the density is
    at most its value at the cell's right end, right of the peak at most its value at the
    left end. A draw above the envelope proves the density is not monotone and raises.
    The cdf is numerical (trapezoid rule on ``grid`` cells per side, then linear
    interpolation), accurate to about 1e-8 for smooth densities.

    Raises
    ------
    InvalidParameterError
        The density is negative, not finite, zero on a whole side, or not monotone on the
        grid.
    """
    a, b, c = _support(domain, support, peak)
    return CustomSinglePeakedLaw((a, b), c, density=pdf, grid=grid, label=name)


def ks_distance(x: ArrayLike, cdf: Callable[[NDArray[np.float64]], ArrayLike]) -> float:
    """Kolmogorov–Smirnov distance sup_t |F_n(t) − F(t)| between data and a continuous cdf.

    Exact for continuous F: the supremum is attained at a data value, from the left or
    from the right (ties handled by the counts of distinct values).
    """
    xs = np.sort(check_finite_1d("x", x))
    u, counts = np.unique(xs, return_counts=True)
    n = xs.size
    le = np.cumsum(counts) / n
    lt = le - counts / n
    f = np.asarray(cdf(u), dtype=np.float64)
    return float(max(np.max(np.abs(f - le)), np.max(np.abs(f - lt))))


# --------------------------------------------------------------------------- SPM_λ by LP
@dataclass(frozen=True, slots=True)
class SPMFit:
    """Result of :func:`spm_lambda`.

    Attributes
    ----------
    lam : float
        Smallest λ found with x ∈ SPM_λ (an upper bound on the exact minimum: exact for
        the reported peak, and the peak is searched numerically).
    peak : float
        Peak (= median) of the best single-peaked law found.
    candidates : int
        Number of peaks for which the linear program was solved.
    """

    lam: float
    peak: float
    candidates: int

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"lam": self.lam, "peak": self.peak, "candidates": self.candidates}


def _lp_lambda(
    u: NDArray[np.float64],
    le: NDArray[np.float64],
    lt: NDArray[np.float64],
    lo: float,
    hi: float,
    c: float,
) -> float:
    """min λ s.t. some F (convex on [lo, c], concave on [c, hi], F(lo)=0, F(c)=1/2,
    F(hi)=1, non-decreasing) has |F(u_j) − le_j| ≤ λ and |F(u_j) − lt_j| ≤ λ."""
    d = u.size
    nv = d + 1  # v_0..v_{d-1}, λ
    fixed: dict[int, float] = {}
    for j, val in enumerate(u):
        if val == lo:
            fixed[j] = 0.0
        elif val == hi:
            fixed[j] = 1.0
        elif val == c:
            fixed[j] = 0.5
    # nodes: (x, var index or -1, constant)
    left_nodes = [(lo, -1, 0.0)] + [(float(u[j]), j, 0.0) for j in range(d) if lo < u[j] < c]
    left_nodes.append((c, -1, 0.5))
    right_nodes = [(c, -1, 0.5)] + [(float(u[j]), j, 0.0) for j in range(d) if c < u[j] < hi]
    right_nodes.append((hi, -1, 1.0))
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs: list[float] = []
    r = 0

    def add(coefs: list[tuple[int, float, float]], bound: float) -> None:
        # Σ coef·value(node) ≤ bound, nodes given as (var, const, coef)
        nonlocal r
        b = bound
        for var, const, coef in coefs:
            if var >= 0 and var not in fixed:
                rows.append(r)
                cols.append(var)
                vals.append(coef)
            else:
                b -= coef * (fixed[var] if var >= 0 else const)
        rhs.append(b)
        r += 1

    def chain(nodes: list[tuple[float, int, float]], convex: bool) -> None:
        sign = 1.0 if convex else -1.0
        for i in range(1, len(nodes) - 1):
            (x0, v0, c0), (x1, v1, c1), (x2, v2, c2) = nodes[i - 1], nodes[i], nodes[i + 1]
            d1, d2 = x1 - x0, x2 - x1
            if d1 <= 0 or d2 <= 0:
                continue
            # convex: (v2-v1)/d2 - (v1-v0)/d1 >= 0  ->  -(...) <= 0
            add([(v2, c2, -sign / d2), (v1, c1, sign / d2 + sign / d1), (v0, c0, -sign / d1)], 0.0)
        # monotone: first slope (convex side) / last slope (concave side) >= 0
        if convex:
            (x0, v0, c0), (x1, v1, c1) = nodes[0], nodes[1]
        else:
            (x0, v0, c0), (x1, v1, c1) = nodes[-2], nodes[-1]
        if x1 > x0:
            add([(v1, c1, -1.0), (v0, c0, 1.0)], 0.0)

    chain(left_nodes, convex=True)
    chain(right_nodes, convex=False)
    for j in range(d):
        # v_j − λ ≤ lt_j   and   −v_j − λ ≤ −le_j
        for sign, bound in ((1.0, float(lt[j])), (-1.0, -float(le[j]))):
            b = bound
            if j in fixed:
                b -= sign * fixed[j]
            else:
                rows.append(r)
                cols.append(j)
                vals.append(sign)
            rows.append(r)
            cols.append(d)
            vals.append(-1.0)
            rhs.append(b)
            r += 1
    a_ub = sparse.csr_matrix((vals, (rows, cols)), shape=(r, nv))
    cost = np.zeros(nv)
    cost[d] = 1.0
    bounds = [(0.0, 1.0)] * d + [(0.0, 1.0)]
    for j, val in fixed.items():
        bounds[j] = (val, val)
    res = optimize.linprog(cost, A_ub=a_ub, b_ub=np.asarray(rhs), bounds=bounds, method="highs")
    if res.status != 0:
        return 1.0
    return float(res.x[d])


def spm_lambda(
    x: ArrayLike,
    domain: tuple[float, float],
    *,
    peaks: ArrayLike | None = None,
    n_candidates: int = 41,
    refine: bool = True,
) -> SPMFit:
    """Smallest λ with x ∈ SPM_λ (Def. 6.4), by linear programming (stretch goal).

    For a fixed peak c, the laws single-peaked at their median c are exactly those whose
    cdf F is convex on [lo, c] and concave on [c, hi] with F(lo) = 0, F(c) = 1/2,
    F(hi) = 1. The KS distance to the data is attained at data values, so the smallest λ
    for that c is a linear program in F at the distinct data values (convexity and
    concavity as slope inequalities between consecutive points), solved with HiGHS. The
    peak is searched over ``peaks`` (default: ``n_candidates`` data values and midpoints
    around the sample median) and refined by a bounded scalar search, so the returned λ
    is exact for the returned peak and an upper bound on the global minimum.

    Parameters
    ----------
    x : array-like of shape (n,)
        Data inside ``domain``.
    domain : (lo, hi)
    peaks : array-like, optional
        Candidate peaks (each strictly inside the domain).
    n_candidates : int, default=41
    refine : bool, default=True

    Notes
    -----
    Cost: one LP with (#distinct values + 1) variables per candidate; a few seconds for
    n = 10^4. CTM data give λ ≤ 1/(n − 1) (Thm 6.7), which the tests check.
    """
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    xs = np.sort(check_finite_1d("x", x))
    if xs[0] < lo or xs[-1] > hi:
        raise InvalidParameterError(
            f"x: locations outside domain=({lo:g}, {hi:g}); the domain must contain the data."
        )
    n = xs.size
    u, counts = np.unique(xs, return_counts=True)
    le = np.cumsum(counts) / n
    lt = le - counts / n
    if peaks is None:
        q = np.quantile(xs, [0.25, 0.75])
        inner = u[(u > lo) & (u < hi) & (u >= q[0]) & (u <= q[1])]
        mids = 0.5 * (inner[1:] + inner[:-1]) if inner.size > 1 else np.empty(0)
        cand = np.unique(np.concatenate((inner, mids, [0.5 * (lo + hi)], [np.median(xs)])))
        cand = cand[(cand > lo) & (cand < hi)]
        if cand.size > n_candidates:
            # keep those nearest the median
            order = np.argsort(np.abs(cand - np.median(xs)), kind="stable")
            cand = np.sort(cand[order[:n_candidates]])
    else:
        cand = np.asarray(peaks, dtype=np.float64).ravel()
        if cand.size == 0 or np.any((cand <= lo) | (cand >= hi)):
            raise InvalidParameterError("peaks: must be non-empty and strictly inside the domain.")
    values = np.array([_lp_lambda(u, le, lt, lo, hi, float(c)) for c in cand])
    best = int(np.argmin(values))
    lam, peak, solved = float(values[best]), float(cand[best]), int(cand.size)
    if refine and cand.size > 1:
        left = float(cand[max(best - 1, 0)])
        right = float(cand[min(best + 1, cand.size - 1)])
        if right > left:
            res = optimize.minimize_scalar(
                lambda c: _lp_lambda(u, le, lt, lo, hi, float(c)),
                bounds=(left, right),
                method="bounded",
                options={"xatol": 1e-10 * (hi - lo), "maxiter": 40},
            )
            solved += int(res.nfev)
            if float(res.fun) < lam:
                lam, peak = float(res.fun), float(res.x)
    return SPMFit(lam=lam, peak=peak, candidates=solved)


# --------------------------------------------------------------------------- worst cases
def ctm_worst_case(
    n: int, k: int, domain: tuple[float, float], *, median: MedianChoice = "lower"
) -> NDArray[np.float64]:
    """D_k^CTM of Lemma 7.8: the CTM data set minimising P(p_α(D, L) ≤ k).

    J = k_med − 1 − k agents at hi − i·m/J (i = 1, …, J, so the last is at lo) and the other
    n − J at hi (the median's end); J = ⌊n/2⌋ − k for odd n, as in the paper. For the
    upper median the set is mirrored. Returned sorted.

    Parameters
    ----------
    n : int
        Number of agents, >= 1.
    k : int
        Loss level, 0 ≤ k ≤ k_med − 1.
    domain : (lo, hi)
    median : {"lower", "upper"}
    """
    n = _check_int("n", n, 1)
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    med = check_median(median)
    k_med = median_index(n, med)
    j_count = (k_med - 1 if med == "lower" else n - k_med) - _check_int("k", k, 0)
    if j_count < 0:
        raise InvalidParameterError(
            f"k={k}: must be at most {k_med - 1 if med == 'lower' else n - k_med} for n={n}."
        )
    m = hi - lo
    spaced = hi - np.arange(1, j_count + 1) * (m / j_count) if j_count else np.empty(0)
    if j_count:
        spaced[-1] = lo
    x = np.concatenate((spaced[::-1], np.full(n - j_count, hi)))
    if med == "upper":
        x = np.sort(lo + hi - x)
    return x


def spm_worst_case(
    n: int, k: int, lam: float, domain: tuple[float, float], *, median: MedianChoice = "lower"
) -> NDArray[np.float64]:
    """D_k^SPM of Lemmas 3.11 / 7.14: the SPM_λ data set minimising P(p_α ≤ k).

    With J = k_med − 1 − k (⌊n/2⌋ − k for odd n) and s = ⌈λn⌉ − 1: s agents at lo, J − s
    agents at lo + i·m/(J + λn) (i = 1, …, J − s), and the other n − J at hi. Mirrored for
    the upper median. Returned sorted.
    """
    n = _check_int("n", n, 1)
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    med = check_median(median)
    lam_f = check_positive("lam", lam)
    k_med = median_index(n, med)
    j_count = (k_med - 1 if med == "lower" else n - k_med) - _check_int("k", k, 0)
    s = math.ceil(lam_f * n) - 1
    if j_count < 0 or s > j_count:
        raise InvalidParameterError(
            f"(k, lam)=({k}, {lam_f:g}): need s = ceil(lam*n) - 1 = {s} <= J = {j_count} "
            "(the agents left of the median); lower k or lam."
        )
    m = hi - lo
    spaced = lo + np.arange(1, j_count - s + 1) * (m / (j_count + lam_f * n))
    x = np.concatenate((np.full(s, lo), spaced, np.full(n - j_count, hi)))
    if med == "upper":
        x = np.sort(lo + hi - x)
    return np.sort(x)


# --------------------------------------------------------------------------- pairs
def change_one_distance(a: ArrayLike, b: ArrayLike) -> int:
    """Change-one distance |D − D'| of two equally sized multisets (Def. 2.4)."""
    xa = check_finite_1d("a", a)
    xb = check_finite_1d("b", b)
    if xa.size != xb.size:
        raise InvalidParameterError(
            f"a and b have sizes {xa.size} and {xb.size}: change-one distance needs equal n."
        )
    vals, inv = np.unique(np.concatenate((xa, xb)), return_inverse=True)
    ca = np.bincount(inv[: xa.size], minlength=vals.size)
    cb = np.bincount(inv[xa.size :], minlength=vals.size)
    return int(np.sum(np.maximum(ca - cb, 0)))


@dataclass(frozen=True, eq=False)
class LowerBoundPair:
    """Two data sets close in change-one distance whose optima are far apart (§5, §7.3).

    Any ε-DP mechanism M has max_i P(M(D_i) ∉ Y_i) ≥ 1/(1 + e^{dε}) for the disjoint
    "good" sets Y_i = (T_i − radius, T_i + radius) (Thm 7.20 with d = :attr:`distance`), so
    FAIR ≥ radius on one of them with at least that probability.

    Attributes
    ----------
    name, theorem : str
    first, second : ndarray
        The two data sets (sorted).
    distance : int
        Their change-one distance, computed (not copied from the paper).
    radius : float
        FAIR threshold: |T_1 − T_2| / 2.
    paper_distance : int
        The distance the paper states (differs for D_0/D_γ, see
        :func:`fair_lower_bound_pair`).
    """

    name: str
    theorem: str
    first: NDArray[np.float64]
    second: NDArray[np.float64]
    distance: int
    radius: float
    paper_distance: int
    median: str = "lower"

    @property
    def optima(self) -> tuple[float, float]:
        """(T(first), T(second))."""
        k = median_index(self.first.size, check_median(self.median))
        return float(self.first[k - 1]), float(self.second[k - 1])

    def probability_bound(self, epsilon: float) -> float:
        """1/(1 + e^{dε}): the least max_i P(FAIR(D_i, M(D_i)) ≥ radius) any ε-DP M has."""
        eps = check_positive("epsilon", epsilon)
        return float(special.expit(-self.distance * eps))

    def to_dict(self) -> dict[str, Any]:
        """Summary (sizes, not the data)."""
        t1, t2 = self.optima
        return {
            "name": self.name,
            "theorem": self.theorem,
            "n": int(self.first.size),
            "distance": self.distance,
            "paper_distance": self.paper_distance,
            "radius": self.radius,
            "optima": [t1, t2],
        }


def impossibility_pair(
    n: int, domain: tuple[float, float], *, median: MedianChoice = "lower"
) -> LowerBoundPair:
    """The bimodal pair of Thm 5.1: FAIR ≥ m/2 w.p. ≥ 1/(1 + e^ε) on one of them.

    D has k_med agents at lo and n − k_med at hi (T(D) = lo); D' moves one agent from lo to
    hi (T(D') = hi). For odd n this is ⌈n/2⌉ at lo and ⌊n/2⌋ at hi as in the paper; for
    even n (lower median) it is n/2 and n/2, then n/2 − 1 and n/2 + 1.
    """
    n = _check_int("n", n, 1)
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    med = check_median(median)
    k = median_index(n, med)
    d1 = np.concatenate((np.full(k, lo), np.full(n - k, hi)))
    d2 = np.concatenate((np.full(k - 1, lo), np.full(n - k + 1, hi)))
    return LowerBoundPair(
        name="impossibility",
        theorem="Thm 5.1",
        first=d1,
        second=d2,
        distance=change_one_distance(d1, d2),
        radius=0.5 * (hi - lo),
        paper_distance=1,
        median=med,
    )


def fair_lower_bound_pair(n: int, steps: int, domain: tuple[float, float]) -> LowerBoundPair:
    """D_0 and D_γ of Thm 7.21 (both in CTM), γ = steps·m/(n − 1).

    D_0: n agents equally spaced over the domain (spacing δ = m/(n − 1)). D_γ: centred at
    T(D_0) − γ, one agent at T(D_0) − γ + jδ for 0 < |j| ≤ (n − n_γ)/2 and n_γ = 2·steps + 1
    agents at T(D_0) − γ. Needs odd n ≥ 5 and γ < m/3.

    The change-one distance is computed: D_γ keeps D_0's agents 1, …, n − 2·steps and moves
    the 2·steps rightmost ones, so d = 2·steps = 2γ(n − 1)/m. The paper states
    h = γ(n − 1)/m (half of it); the Ω-rate of Thm 7.21 is unaffected, but the exact
    probability bound 1/(1 + e^{dε}) must use the true d.
    """
    n = _check_int("n", n, 5)
    if n % 2 == 0:
        raise InvalidParameterError(f"n={n}: the D_0/D_gamma construction needs odd n.")
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    m = hi - lo
    g = _check_int("steps", steps, 1)
    delta = m / (n - 1)
    if g * delta >= m / 3:
        raise InvalidParameterError(
            f"steps={g}: gamma = steps*m/(n-1) must be < m/3 (steps < {(n - 1) / 3:g})."
        )
    idx = np.arange(n)
    d0 = np.asarray(lo + idx * delta, dtype=np.float64)
    d0[-1] = hi
    ic = (n - 1) // 2
    keep = lo + idx[: n - 2 * g] * delta  # agents 0..n-1-2g of D_0
    dg = np.sort(np.concatenate((keep, np.full(2 * g, lo + (ic - g) * delta))))
    return LowerBoundPair(
        name="D0/Dgamma",
        theorem="Thm 7.21",
        first=d0,
        second=dg,
        distance=change_one_distance(d0, dg),
        radius=0.5 * g * delta,
        paper_distance=g,
    )


def spm_lower_bound_pair(n: int, lam: float, domain: tuple[float, float]) -> LowerBoundPair:
    """D_1 and D_2 of Thm 7.24: neighbours in SPM_λ whose optima differ by s·m/n.

    D_0 has agents at lo + j·m/n (j = 1, …, n); s = ⌊λn⌋ − 1. D_1 moves the agents
    j = ⌈n/2⌉ − s + 1, …, ⌈n/2⌉ to lo; D_2 moves j = ⌈n/2⌉ − s, …, ⌈n/2⌉ − 1. Needs s ≥ 1
    and s < ⌈n/2⌉.
    """
    n = _check_int("n", n, 3)
    lo, hi = check_interval_bounds("domain", domain, example="(0.0, 1.0)")
    lam_f = check_positive("lam", lam)
    s = math.floor(lam_f * n) - 1
    k = (n + 1) // 2
    if s < 1 or s >= k:
        raise InvalidParameterError(
            f"lam={lam_f:g}: need 1 <= s = floor(lam*n) - 1 < ceil(n/2) (got s={s} for n={n})."
        )
    m = hi - lo
    j = np.arange(1, n + 1)
    d0 = np.asarray(lo + j * (m / n), dtype=np.float64)
    d0[-1] = hi
    d1 = d0.copy()
    d1[(j >= k - s + 1) & (j <= k)] = lo
    d2 = d0.copy()
    d2[(j >= k - s) & (j <= k - 1)] = lo
    d1.sort()
    d2.sort()
    t1, t2 = float(d1[k - 1]), float(d2[k - 1])
    return LowerBoundPair(
        name="D1/D2",
        theorem="Thm 7.24",
        first=d1,
        second=d2,
        distance=change_one_distance(d1, d2),
        radius=0.5 * abs(t2 - t1),
        paper_distance=1,
    )

r"""Exact choice of a piece with probability ∝ M_j·exp(−c·d_j): a Las Vegas sampler.

The exponential mechanisms of dpfair choose one of K pieces (cells of a public grid, runs
of lattice cells, public candidates) with probability proportional to

.. math:: w_j = M_j \, e^{-c\, d_j},

M_j ≥ 0 an exactly known multiplicity (an integer number of cells, or the exact length of
a piece between two binary64 edges), d_j ≥ 0 an integer score offset and c > 0 a public
rate given as an exact rational (:func:`exact_rate`). Inverting a floating-point
cumulative sum against a 53-bit uniform realises this law only up to a total-variation
slack η ≈ K·2^-52, so the executed mechanism would be (ε, (1 + e^ε)η)-DP rather than
ε-DP. :func:`choose_pieces` removes the slack: its output has *exactly* the law
w_j / Σ w (real arithmetic, no approximation), so every pure-ε and zCDP statement proved
for the real-arithmetic exponential mechanism holds for the executed code.

Algorithm (one draw)
--------------------
U is a uniform real in [0, 1), revealed 64 bits at a time (the first word B from the
generator: U ∈ [B/2^64, (B + 1)/2^64)). The piece is the j with C_j ≤ U·T < C_{j+1},
C_j = Σ_{i<j} w_i the exact cumulative masses and T = C_K (or a given upper bound T ≥ C_K,
the "reject" outcome K then having probability 1 − C_K/T). This is inversion of the
exact distribution function, so the output law is exact *provided every comparison is
decided correctly*; the two paths below only ever return a j for which the comparisons
are certain.

* **Fast path** (binary64, vectorised): ŵ_j = fl(M̂_j·exp(−fl(ĉ·d_j))) and the sequential
  sums S_i = fl(S_{i−1} + ŵ_{i−1}) (``numpy.cumsum`` of non-negative terms), with the
  rigorous bound |S_i − C_i| ≤ E_i = (γ_i + ρ)·S_i/(1 − γ_i) + A, γ_i = i·u/(1 − i·u),
  u = 2^-53. ρ bounds the relative error of each term: the rate's rounding ĉ = c(1 ± u),
  the product ĉ·d_j (± u), which moves exp's argument t_j ≤ 700 by ≤ 2.01·u·t_j; the
  platform's ``exp`` (assumed accurate to 2^-45 relatively for normal results,
  ``docs/floating_point.md``, platform assumptions); the product with M̂_j (± u); and the
  caller's bound on |M̂_j − M_j|/M_j. All offsets are first reduced by the smallest d_j
  among pieces with mass (a common factor e^{−c·shift}, exact; offsets of empty pieces are
  irrelevant and clamped at 0). Terms with fl(ĉ·d_j) > 700 are set to 0 and their
  true mass (≤ M_j·e^-699) goes into the absolute allowance A, together with K·2^-1074
  for subnormal products. If the interval [B·2^-53·T_lo, (B+1)·2^-53·T_hi] (B the top 53
  bits; outward-rounded) lies, with these margins, strictly inside one piece, that piece
  is returned. Otherwise (probability ≈ 2·(#pieces near the draw)·max_i E_i/T, about
  K·10^-13 in practice, see the tests) the draw goes to
* **the slow path** (exact, pure Python ``decimal``): enclosures of every w_j at P
  significant digits, with t_j = c·d_j enclosed by directed divisions, exp correctly
  rounded (``decimal``'s exp; a margin of 10 ulps is added anyway) and products and
  prefix sums rounded towards −∞ for the lower and +∞ for the upper enclosure. U gets
  64 more bits whenever its interval is wider than 10^-P, and P doubles (40, 80, 160, …
  digits) until the comparison is certain, which happens after finitely many rounds
  with probability 1 (U·T hits a boundary C_j exactly with probability 0).

Timing. The fast path is O(K) set-up plus O(log K) per draw, a fixed sequence of
floating-point operations for given public sizes. The slow path runs with a probability
that depends on the masses (hence on the data) only through how close the draw lands to
a cumulative boundary; its cost is O(K) decimal operations per round and the expected
number of rounds is ≈ 1. An observer of wall time can learn that the slow path ran (an
event of probability ~K·10^-13); we make no constant-time claim (``docs/floating_point.md``).

Data dependence. The output is a deterministic function of (M̂_j, exact M_j, d_j, c) and the
generator's words: two data sets with the same multiplicities and integer offsets give
bit-identical outputs under a common seed.
"""

from __future__ import annotations

import bisect
import decimal
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator

__all__ = ["PieceMasses", "choose_piece", "choose_pieces", "choose_windowed", "exact_rate"]

_U = 2.0**-53
#: Assumed relative accuracy of ``numpy.exp`` for results in the normal range (platform
#: assumption, ``docs/floating_point.md``; glibc and numpy's SIMD exp are < 4 ulps).
EXP_REL_ERROR = 2.0**-45
#: Arguments above this are not exponentiated on the fast path (their mass is bounded).
_T_MAX = 700.0
#: Test hook: an extra relative error added to every fast-path bound (0 in production).
#: Raising it makes the slow path run often, so its law can be tested.
_FAST_PATH_SLACK = 0.0
#: First precision (significant decimal digits) of the slow path; doubled each round.
_SLOW_DIGITS = 40


@dataclass(frozen=True)
class PieceMasses:
    """Multiplicities M_j ≥ 0 of the pieces: a binary64 approximation and the exact values.

    Attributes
    ----------
    approx : ndarray of float64
        M̂_j with |M̂_j − M_j| ≤ ``rel_err``·M_j (and M̂_j = 0 iff M_j = 0).
    rel_err : float
        The relative error bound of ``approx``.
    exact : callable
        ``exact(j)`` returns M_j as a :class:`fractions.Fraction` (slow path only).
    """

    approx: NDArray[np.float64]
    rel_err: float
    exact: Callable[[int], Fraction]

    @classmethod
    def exact_floats(cls, values: ArrayLike) -> PieceMasses:
        """Masses that *are* the given binary64 numbers (e.g. integers < 2^53, ones)."""
        v = np.ascontiguousarray(values, dtype=np.float64)
        if v.ndim != 1 or not np.all(v >= 0) or not np.all(np.isfinite(v)):
            raise InvalidParameterError("masses must be a 1-D array of finite values >= 0.")
        return cls(v, 0.0, lambda j: Fraction(float(v[j])))

    @classmethod
    def lengths(cls, edges: ArrayLike, density: ArrayLike | None = None) -> PieceMasses:
        """M_j = (e_{j+1} − e_j)·h_j: exact lengths between binary64 edges (times h_j).

        fl(e_{j+1} − e_j) is correctly rounded (relative error ≤ u), and so is the product
        with a binary64 density h_j; the exact values are computed with fractions.
        """
        e = np.asarray(edges, dtype=np.float64)
        if e.ndim != 1 or e.size < 2:
            raise InvalidParameterError("edges must be a 1-D array of at least two values.")
        approx = e[1:] - e[:-1]
        # min() is NaN if any edge is NaN or ±inf (inf − inf, or a finite end check fails)
        if not (math.isfinite(e[0]) and math.isfinite(e[-1]) and approx.min() >= 0):
            raise InvalidParameterError("edges must be finite and non-decreasing.")
        if density is None:
            return cls(approx, _U, lambda j: Fraction(float(e[j + 1])) - Fraction(float(e[j])))
        h = np.ascontiguousarray(density, dtype=np.float64)
        if h.shape != approx.shape or not np.all(h >= 0) or not np.all(np.isfinite(h)):
            raise InvalidParameterError("density must be finite, >= 0, one value per piece.")

        def exact(j: int) -> Fraction:
            return (Fraction(float(e[j + 1])) - Fraction(float(e[j]))) * Fraction(float(h[j]))

        return cls(approx * h, 2.0 * _U + _U * _U, exact)

    def __len__(self) -> int:
        return int(self.approx.size)

    def take(self, index: NDArray[np.intp]) -> PieceMasses:
        """The masses of the pieces ``index`` (in that order)."""
        idx = np.asarray(index, dtype=np.intp)
        outer = self.exact
        return PieceMasses(self.approx[idx], self.rel_err, lambda j: outer(int(idx[j])))

    def append(self, value: Fraction) -> PieceMasses:
        """These masses followed by one more piece of exact mass ``value`` (≥ 0)."""
        value = value if isinstance(value, Fraction) else Fraction(value)
        if value < 0:
            raise InvalidParameterError("a mass must be >= 0.")
        k = len(self)
        outer = self.exact
        approx = np.append(self.approx, float(value))  # correctly rounded: rel. error ≤ u
        return PieceMasses(approx, max(self.rel_err, _U),
                           lambda j: value if j == k else outer(j))


@functools.lru_cache(maxsize=256)
def exact_rate(epsilon: float, units_per_sensitivity: int | Fraction = 1) -> Fraction:
    """The rate c ≤ ε/(2·S) per integer unit of score, as an exact rational.

    ``S = units_per_sensitivity`` is the number of score units one neighbour can move
    the score by. The binary64 ε is first lowered by a relative 2^-50 (rounded), so the
    executed mechanism is ε′-DP with ε′ = 2cS ≤ ε(1 − 2^-51): both the pure ε statement and
    the zCDP statement ε²/8 (computed in binary64 by the ledger, relative error ≤ 2^-52)
    hold as executed.
    """
    eps = float(epsilon)
    if not (eps > 0 and math.isfinite(eps)):
        raise InvalidParameterError(f"epsilon={epsilon!r}: must be > 0 and finite.")
    s = Fraction(units_per_sensitivity)
    if s <= 0:
        raise InvalidParameterError("units_per_sensitivity must be > 0.")
    return Fraction(eps * (1.0 - 2.0**-50)) / (2 * s)


def _as_units(units: ArrayLike, k: int) -> tuple[NDArray[np.int64], int]:
    """(d as int64, min d), validated: k integers in [0, 2^52)."""
    d = np.asarray(units)
    if d.shape != (k,) or k == 0:
        raise InvalidParameterError("units must be integers, one per piece (at least one).")
    if not np.issubdtype(d.dtype, np.integer):
        if not (np.issubdtype(d.dtype, np.floating) and np.all(d == np.rint(d))):
            raise InvalidParameterError("units must be integers, one per piece.")
    d = d.astype(np.int64, copy=False)
    lo, hi = int(d.min()), int(d.max())
    if lo < 0 or hi >= 2**52:
        raise InvalidParameterError("units must be integers in [0, 2^52).")
    return d, lo


def _words(gen: np.random.Generator, count: int) -> NDArray[np.uint64]:
    """``count`` uniform 64-bit words (one generator output each)."""
    return gen.integers(0, 2**64 - 1, size=count, dtype=np.uint64, endpoint=True)


def choose_pieces(
    masses: PieceMasses,
    units: ArrayLike,
    rate: Fraction,
    rng: RandomLike = None,
    size: int | None = None,
    *,
    total: tuple[Fraction, int] | None = None,
) -> NDArray[np.intp]:
    """Exact draws of j with P(j) = M_j e^{−c d_j} / T (module docstring).

    Parameters
    ----------
    masses : PieceMasses
        The multiplicities M_j (K pieces; at least one with M_j > 0 unless ``total``).
    units : array of int
        d_j ≥ 0.
    rate : Fraction
        c > 0 (:func:`exact_rate`).
    rng : seed or Generator
    size : int or None
        Number of draws (None: one draw, returned as an array of shape (1,)).
    total : (M_T, d_T), optional
        T = M_T·e^{−c d_T} instead of T = Σ_j w_j. The caller guarantees T ≥ Σ_j w_j; the
        outcome K ("none of the pieces") then has probability 1 − Σ_j w_j / T.

    Returns
    -------
    ndarray of intp, shape (size,) (or (1,))
    """
    gen = as_generator(rng)
    count = 1 if size is None else int(size)
    k = len(masses)
    d, shift = _as_units(units, k)
    c = rate if isinstance(rate, Fraction) else Fraction(rate)
    if c <= 0:
        raise InvalidParameterError("rate must be > 0.")
    top: tuple[Fraction, int] | None = None
    if total is not None:
        top = (Fraction(total[0]), int(total[1]))
        if top[0] <= 0 or top[1] < 0:
            raise InvalidParameterError("total must be (M_T > 0, d_T >= 0).")
        shift = top[1]
    positive = masses.approx > 0
    if positive.any():
        # Common factor e^{-c·shift}: the smallest offset among pieces *with* mass gets
        # t = 0, so no mass-carrying piece is needlessly pushed past the cut-off t > 700.
        shift = int(d[positive].min()) if top is None else min(int(d[positive].min()), shift)
    elif top is None:
        raise InvalidParameterError("the pieces have no mass.")
    if top is not None:
        top = (top[0], top[1] - shift)
    # Zero-mass pieces may sit below the shift; their offsets do not matter: clamp at 0.
    ds = np.maximum(d - shift, 0) if shift else d
    words = _words(gen, count)
    out, undecided = _fast(masses, ds, c, top, words)
    if undecided.any():
        for i in np.flatnonzero(undecided):
            out[i] = _slow(masses, ds, c, top, int(words[i]), gen)
    return out


@functools.lru_cache(maxsize=64)
def _term_error(rel_err: float) -> float:
    """ρ′: |ŵ_j − w_j| ≤ ρ′·ŵ_j for every term with fl(ĉ·d_j) ≤ 700 (module docstring)."""
    rho = ((1.0 + rel_err) * (1.0 + EXP_REL_ERROR) * math.exp(2.01 * _U * _T_MAX)
           * (1.0 + _U) - 1.0) * 1.001
    return rho / (1.0 - rho)


def _fast(
    masses: PieceMasses,
    d: NDArray[np.int64],
    c: Fraction,
    total: tuple[Fraction, int] | None,
    words: NDArray[np.uint64],
) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """Fast-path decisions: (pieces, undecided mask). See the module docstring."""
    k = d.size
    if k * _U >= 0.01:
        raise InvalidParameterError("too many pieces for the exact sampler (K >= 2^46).")
    c_hat = float(c)
    t = c_hat * d
    s = np.empty(k + 1, dtype=np.float64)
    s[0] = 0.0
    tail = 0.0
    if float(t.max()) > _T_MAX:
        big = t > _T_MAX
        with np.errstate(under="ignore"):
            w = masses.approx * np.exp(-np.minimum(t, _T_MAX))
        w[big] = 0.0
        tail = float(np.sum(masses.approx[big]))
    else:
        with np.errstate(under="ignore"):
            w = masses.approx * np.exp(-t)
    np.cumsum(w, out=s[1:])
    rho = _term_error(masses.rel_err) + _FAST_PATH_SLACK
    allowance = (tail * (1.0 + masses.rel_err) * (1.0 + k * _U * 1.01) * math.exp(-699.0)
                 + (k + 1) * 2.0**-1074) * 2.0
    s_k = float(s[k])
    g_k = k * _U / (1.0 - k * _U)
    err_k = ((g_k + rho) * s_k / (1.0 - g_k)) * (1.0 + 1e-6) + allowance
    if total is None:
        t_hat, t_err = s_k, err_k
    else:
        m_t, d_t = total
        arg = c_hat * float(d_t)
        if arg > _T_MAX:  # the fast path does not handle this (never in dpfair); go slow
            return np.full(words.size, k, dtype=np.intp), np.ones(words.size, dtype=bool)
        t_hat = float(m_t) * math.exp(-arg)
        rho_t = _term_error(_U) + _FAST_PATH_SLACK
        t_err = t_hat * rho_t + 2.0**-1070
    t_lo = (t_hat - t_err) * (1.0 - 4.0 * _U)
    t_hi = (t_hat + t_err) * (1.0 + 4.0 * _U)
    if words.size == 1:  # one draw: the same comparisons on Python floats
        top = float(int(words[0]) >> 11)  # U ∈ [top·2^-53, (top + 1)·2^-53)
        x_lo = top * 2.0**-53 * t_lo * (1.0 - 4.0 * _U)
        x_hi = (top + 1.0) * 2.0**-53 * t_hi * (1.0 + 4.0 * _U)
        j = int(np.searchsorted(s, x_lo, side="right")) - 1
        if j < k:
            g0, g1 = j * _U / (1.0 - j * _U), (j + 1) * _U / (1.0 - (j + 1) * _U)
            s0, s1 = float(s[j]), float(s[j + 1])
            e0 = ((g0 + rho) * s0 / (1.0 - g0)) * (1.0 + 1e-6) + allowance
            e1 = ((g1 + rho) * s1 / (1.0 - g1)) * (1.0 + 1e-6) + allowance
            ok = ((s0 + e0) * (1.0 + 4.0 * _U) <= x_lo
                  and x_hi < (s1 - e1) * (1.0 - 4.0 * _U) and t_lo > 0)
        else:
            ok = (total is not None and (s_k + err_k) * (1.0 + 4.0 * _U) <= x_lo
                  and x_lo > 0)
            j = k
        return np.array([j], dtype=np.intp), np.array([not ok])

    def err(i: NDArray[np.intp]) -> NDArray[np.float64]:
        g = i * _U / (1.0 - i * _U)
        return ((g + rho) * s[i] / (1.0 - g)) * (1.0 + 1e-6) + allowance

    top_v = (words >> np.uint64(11)).astype(np.float64)
    xs_lo = top_v * 2.0**-53 * t_lo * (1.0 - 4.0 * _U)
    xs_hi = (top_v + 1.0) * 2.0**-53 * t_hi * (1.0 + 4.0 * _U)
    jv = np.searchsorted(s, xs_lo, side="right") - 1
    jc = np.minimum(jv, k - 1)
    inside = jv < k
    ok_low = (s[jc] + err(jc)) * (1.0 + 4.0 * _U) <= xs_lo
    ok_high = xs_hi < (s[jc + 1] - err(jc + 1)) * (1.0 - 4.0 * _U)
    decided = inside & ok_low & ok_high & (t_lo > 0)
    if total is not None:  # beyond all pieces: the "none" outcome K
        beyond = (s_k + err_k) * (1.0 + 4.0 * _U) <= xs_lo
        decided |= beyond & ~inside & (xs_lo > 0)
        jv = np.where(~inside, k, jv)
    return jv.astype(np.intp), ~decided


class _Enclosures:
    """Directed-rounding decimal arithmetic at ``digits`` significant digits."""

    def __init__(self, digits: int, rate: Fraction) -> None:
        common = {"prec": digits, "Emin": decimal.MIN_EMIN, "Emax": decimal.MAX_EMAX}
        self.lo = decimal.Context(rounding=decimal.ROUND_FLOOR, **common)  # type: ignore[arg-type]
        self.hi = decimal.Context(rounding=decimal.ROUND_CEILING, **common)  # type: ignore[arg-type]
        self.near = decimal.Context(prec=digits + 2, Emin=decimal.MIN_EMIN,
                                    Emax=decimal.MAX_EMAX)
        slack = decimal.Decimal(10) ** (-digits)  # ≥ 10 ulps of a (digits + 2)-digit result
        self.down, self.up = 1 - slack, 1 + slack
        self.numer, self.denom = rate.numerator, rate.denominator
        self.cache: dict[int, tuple[decimal.Decimal, decimal.Decimal]] = {}

    def exp(self, units: int) -> tuple[decimal.Decimal, decimal.Decimal]:
        """[lower, upper] ∋ exp(−c·units)."""
        if units not in self.cache:
            t = decimal.Decimal(self.numer * units)
            q = decimal.Decimal(self.denom)
            t_lo, t_hi = self.lo.divide(t, q), self.hi.divide(t, q)
            self.cache[units] = (self.lo.multiply(self.near.exp(-t_hi), self.down),
                                 self.hi.multiply(self.near.exp(-t_lo), self.up))
        return self.cache[units]

    def weight(self, mass: Fraction, units: int) -> tuple[decimal.Decimal, decimal.Decimal]:
        """[lower, upper] ∋ mass·exp(−c·units)."""
        if mass == 0:
            return decimal.Decimal(0), decimal.Decimal(0)
        e_lo, e_hi = self.exp(units)
        p, q = decimal.Decimal(mass.numerator), decimal.Decimal(mass.denominator)
        return (self.lo.multiply(self.lo.divide(p, q), e_lo),
                self.hi.multiply(self.hi.divide(p, q), e_hi))


def _slow(
    masses: PieceMasses,
    d: NDArray[np.int64],
    c: Fraction,
    total: tuple[Fraction, int] | None,
    first_word: int,
    gen: np.random.Generator,
) -> int:
    """Exact decision by interval arithmetic at increasing precision (module docstring)."""
    k = d.size
    n_u, bits = first_word, 64
    digits = _SLOW_DIGITS
    units = [int(v) for v in d]
    exact_m = [masses.exact(j) for j in range(k)]
    while True:
        enc = _Enclosures(digits, c)
        cum_lo: list[decimal.Decimal] = [decimal.Decimal(0)]
        cum_hi: list[decimal.Decimal] = [decimal.Decimal(0)]
        for j in range(k):
            w_lo, w_hi = enc.weight(exact_m[j], units[j])
            cum_lo.append(enc.lo.add(cum_lo[-1], w_lo))
            cum_hi.append(enc.hi.add(cum_hi[-1], w_hi))
        if total is None:
            tot_lo, tot_hi = cum_lo[k], cum_hi[k]
        else:
            tot_lo, tot_hi = enc.weight(total[0], total[1])
        # U to about the same relative precision as the masses.
        while bits < 3.33 * digits + 8:
            n_u = (n_u << 64) | int(_words(gen, 1)[0])
            bits += 64
        scale = decimal.Decimal(1 << bits)  # exact: the int constructor never rounds
        x_lo = enc.lo.multiply(enc.lo.divide(decimal.Decimal(n_u), scale), tot_lo)
        x_hi = enc.hi.multiply(enc.hi.divide(decimal.Decimal(n_u + 1), scale), tot_hi)
        j = bisect.bisect_right(cum_hi, x_lo) - 1
        if j < k and x_hi < cum_lo[j + 1]:
            return j
        if j >= k and total is not None and x_lo >= cum_hi[k]:
            return k
        digits *= 2


def choose_piece(
    masses: PieceMasses,
    units: Sequence[int] | NDArray[np.int64],
    rate: Fraction,
    rng: RandomLike = None,
    *,
    total: tuple[Fraction, int] | None = None,
) -> int:
    """One draw of :func:`choose_pieces`, as an int."""
    return int(choose_pieces(masses, units, rate, rng, None, total=total)[0])


def choose_windowed(
    window: PieceMasses,
    window_units: NDArray[np.int64],
    rate: Fraction,
    outside: tuple[Fraction, int] | None,
    full: Callable[[], tuple[NDArray[np.bool_], PieceMasses, NDArray[np.int64]]],
    rng: RandomLike = None,
    size: int | None = None,
) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """Exact draws from all pieces while looking, almost always, at a window only.

    ``outside = (M_out, d_out)`` gives U_out = M_out·e^{−c d_out} ≥ W_out, the exact mass
    of the pieces outside the window (``None``: the window holds every piece). Each draw
    chooses among the window pieces plus a virtual piece of mass U_out (exact); a draw
    that lands on the virtual piece (probability ≤ U_out/(W_in + U_out)) calls ``full()``
    once — ``(in_window, masses, units)`` of *all* pieces — and keeps an outside piece j
    with probability w_j/U_out (one exact choice with total U_out), otherwise it is
    replaced by an exact draw from the full law (what a restart of the rejection loop
    would return in law). So every draw has exactly the law w_j/Σw, and the call ends
    after at most one O(K) step.

    Returns
    -------
    positions : ndarray of intp
        For draws with ``in_window`` True, the position in the window; otherwise the
        position in ``full()``'s arrays.
    in_window : ndarray of bool
    """
    gen = as_generator(rng)
    count = 1 if size is None else int(size)
    if outside is None:
        return choose_pieces(window, window_units, rate, gen, count), np.ones(count, bool)
    width = len(window)
    pick = choose_pieces(window.append(outside[0]), np.append(window_units, outside[1]),
                         rate, gen, count)
    in_window = pick < width
    rest = np.flatnonzero(~in_window)
    if rest.size:
        inside_full, masses, units = full()
        outs = np.flatnonzero(~inside_full)
        got = np.full(rest.size, outs.size, dtype=np.intp)
        if outs.size:
            got = choose_pieces(masses.take(outs), units[outs], rate, gen, rest.size,
                                total=outside)
        accepted = got < outs.size
        pick[rest[accepted]] = outs[got[accepted]]
        rejected = rest[~accepted]
        if rejected.size:
            pick[rejected] = choose_pieces(masses, units, rate, gen, rejected.size)
    return pick, in_window

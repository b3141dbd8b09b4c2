r"""Exact vectorised Bernoulli(exp(−E)) for E = F + r/D (integers F ≥ 0, 0 ≤ r < D ≤ 2^62).

The acceptance test of the discrete Gaussian sampler (``discrete_gaussian.py``). Write the
remainder in base 2^b, r = Σ_j r_j 2^{bj} (J digits, 2^{bJ} ≥ D). Then

    exp(−E) = exp(−F) · Π_j exp(−r_j 2^{bj}/D),

a product of J + 1 factors, each one entry of a small table: c_F = ⌊2^62 e^{−F}⌋ (F ≤ 43,
shared by all D) and T_j[v] = ⌊2^62 e^{−v 2^{bj}/D}⌋ (v < 2^b, built once per D and cached).
A Bernoulli(p) draw is [U < p] for a uniform real U ∈ [0, 1); with u the first 62 bits of
U, U < p holds iff u < ⌊2^62 p⌋, fails iff u > ⌊2^62 p⌋, and only on the tie
u = ⌊2^62 p⌋ (probability 2^-62) does it depend on further bits, which are then drawn and
compared with further exactly computed bits of p (:func:`exp_neg_frac_floor`; 2^62 p is
irrational for every factor with a nonzero exponent, so this stops with probability 1;
the zero exponent has 2^62 p = 2^62 > u and never ties). With independent U per factor,
the product of the J + 1 indicators is Bernoulli(Π p) = Bernoulli(exp(−E)) exactly.
Vectorised, one round is J + 1 uniform 62-bit words per candidate, a table look-up and
one integer comparison each; no floating-point number enters the law.

Building T_j exactly: the base β = e^{−w/D} (w = 2^{bj} ≤ D) is bracketed by two
consecutive partial sums of its alternating Taylor series (terms x^k/k! with x ≤ 1 do not
increase), both exact rationals, and rounded outwards to integers L₁ ≤ 2^P β ≤ H₁
(P = 128 bits). Powers are formed with directed rounding, L_v = ⌊L_{v−1}L₁/2^P⌋ and
H_v = ⌈H_{v−1}H₁/2^P⌉, so L_v ≤ 2^P β^v ≤ H_v by induction; the entry is
⌊L_v/2^{P−62}⌋ when it equals ⌊H_v/2^{P−62}⌋, and is otherwise computed by
:func:`exp_neg_frac_floor` directly (probability ~2^-55 per entry at P = 128).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["ExpTables", "accept_exp", "decide_exp", "exp_neg_frac_floor", "exp_tables"]

#: Bits of the uniform prefix compared with each factor.
_BITS = 62
#: Working precision (bits) of the table builder's interval arithmetic.
_PREC = 128
#: Digit width b: J = ⌈log2 D / b⌉ factors of at most 2^b entries each.
_DIGIT_BITS = 9


# --------------------------------------------------------------------------- exact floors
def _series_bracket(a: int, d: int, k_max: int) -> tuple[int, int, int, int]:
    """(n₁, d₁, n₂, d₂): the partial sums S_K = n₁/d₁ and S_{K+1} = n₂/d₂ of
    Σ_k (−a/d)^k/k!, K = ``k_max``, as exact integers (Horner: R_K = 1,
    R_{k−1} = 1 − (a/(kd))·R_k, S_K = R_0)."""
    num, den = 1, 1
    for k in range(k_max, 0, -1):
        den_new = k * d * den
        num = den_new - a * num
        den = den_new
    # S_{K+1} = S_K + (−a)^{K+1}/(d^{K+1}(K+1)!) ; d^K K! = den
    k1 = k_max + 1
    den2 = den * d * k1
    num2 = num * d * k1 + (-a) ** k1
    return num, den, num2, den2


def _terms_for(bits: int) -> int:
    """K with 1/(K+1)! < 2^-(bits+8): the bracket of x ≤ 1 is then narrower than that."""
    k, log2_fact = 1, 0.0
    while log2_fact < bits + 8:
        k += 1
        log2_fact += math.log2(k)
    return k


@functools.lru_cache(maxsize=1024)
def exp_neg_frac_floor(a: int, d: int, bits: int) -> int:
    """⌊e^{−a/d}·2^bits⌋ exactly, for integers 0 ≤ a ≤ d, d ≥ 1 (Python integers).

    For x = a/d ≤ 1 the terms x^k/k! of e^{−x} = Σ(−x)^k/k! do not increase, so e^{−x} lies
    between consecutive partial sums S_K and S_{K+1}; K grows until both have the same
    floor (e^{−x}·2^bits is irrational for a ≥ 1, so this terminates; a = 0 gives 2^bits).
    """
    if not (0 <= a <= d and d >= 1 and bits >= 0):
        raise ValueError("exp_neg_frac_floor: need 0 <= a <= d, d >= 1, bits >= 0")
    if a == 0:
        return 1 << bits
    k = _terms_for(bits)
    while True:
        n1, d1, n2, d2 = _series_bracket(a, d, k)
        f1, f2 = (n1 << bits) // d1, (n2 << bits) // d2
        if f1 == f2:
            return f1
        k += 8


def _base_bounds(w: int, d: int, prec: int) -> tuple[int, int]:
    """Integers L ≤ 2^prec·e^{−w/d} ≤ H (0 < w ≤ d), from a bracketing pair of partial sums."""
    n1, d1, n2, d2 = _series_bracket(w, d, _terms_for(prec))
    lo_n, lo_d, hi_n, hi_d = (n1, d1, n2, d2) if n1 * d2 <= n2 * d1 else (n2, d2, n1, d1)
    return (lo_n << prec) // lo_d, -((-hi_n << prec) // hi_d)


def _digit_table(w: int, d: int, n: int, prec: int) -> list[int]:
    """[⌊2^62 e^{−v w/d}⌋ for v < n] (exact; v·w < d for every v used)."""
    out = [1 << _BITS]
    if n == 1:
        return out
    l1, h1 = _base_bounds(w, d, prec)
    lo = hi = 1 << prec
    shift = prec - _BITS
    for v in range(1, n):
        lo = (lo * l1) >> prec
        hi = -((-hi * h1) >> prec)
        f = lo >> shift
        if f != hi >> shift:  # the interval straddles an integer: compute this entry exactly
            f = exp_neg_frac_floor(v * w, d, _BITS)
        out.append(f)
    return out


# --------------------------------------------------------------------------- tables
#: c_F = ⌊2^62 e^{−F}⌋ for F = 0..43 (c_43 = 0): index min(F, 43).
_INT_MAX = 43


def _int_floor(f: int, bits: int) -> int:
    """⌊2^bits e^{−f}⌋ for an integer f ≥ 0 (f·(f-th power of the exact e^{−1} bracket))."""
    if f == 0:
        return 1 << bits
    if 10 * f >= 7 * bits + 7:  # e^{−f}·2^bits ≤ e^{−f + 0.7·bits} < 1 (ln 2 < 0.7)
        return 0
    # e^{−f} = (e^{−1})^f: bracket e^{−1} at high precision, raise both ends, compare floors.
    prec = bits + 64 + 8 * f.bit_length()
    while True:
        lo1, hi1 = _base_bounds(1, 1, prec)
        lo, hi = 1 << prec, 1 << prec
        for _ in range(f):
            lo = (lo * lo1) >> prec
            hi = -((-hi * hi1) >> prec)
        flo, fhi = lo >> (prec - bits), hi >> (prec - bits)
        if flo == fhi:
            return flo
        prec += 64


_INT_TABLE = np.array([_int_floor(f, _BITS) for f in range(_INT_MAX + 1)], dtype=np.int64)


@dataclass(frozen=True)
class ExpTables:
    """Digit tables of exp(−r/D) for one denominator D (module docstring)."""

    den: int
    digit_bits: int
    shifts: NDArray[np.int64]  # (J, 1): b·j
    offsets: NDArray[np.int64]  # (J, 1): start of T_j in ``table``
    table: NDArray[np.int64]  # T_0 ‖ T_1 ‖ … ‖ T_{J−1}

    @property
    def rows(self) -> int:
        """J + 1: uniform words per candidate."""
        return int(self.shifts.shape[0]) + 1


def _build(den: int, digit_bits: int, prec: int) -> ExpTables:
    d, b = int(den), int(digit_bits)
    if not 1 <= d <= 2**62:
        raise ValueError("exp_tables: need 1 <= den <= 2^62")
    nbits = (d - 1).bit_length()
    n_digits = -(-nbits // b)
    parts: list[list[int]] = []
    for j in range(n_digits):
        n_j = min(1 << b, ((d - 1) >> (b * j)) + 1)
        parts.append(_digit_table(1 << (b * j), d, n_j, prec))
    offs = np.cumsum([0] + [len(p) for p in parts[:-1]]) if parts else np.zeros(0)
    flat = [x for p in parts for x in p]
    return ExpTables(
        den=d,
        digit_bits=b,
        shifts=(b * np.arange(n_digits, dtype=np.int64)).reshape(-1, 1),
        offsets=np.asarray(offs, dtype=np.int64).reshape(-1, 1),
        table=np.array(flat, dtype=np.int64),
    )


@functools.lru_cache(maxsize=64)
def exp_tables(den: int) -> ExpTables:
    """The (cached) digit tables for denominator ``den`` (1 ≤ den ≤ 2^62)."""
    return _build(int(den), _DIGIT_BITS, _PREC)


# --------------------------------------------------------------------------- decisions
def _below_exp_neg(prefix: int, a: int, d: int, gen: np.random.Generator) -> bool:
    """U < e^{−a/d} for U with first 62 bits ``prefix`` tied with ⌊2^62 e^{−a/d}⌋: draws
    further 62-bit digits of U while they tie with the exact digits of e^{−a/d}
    (a/d ≤ 1, or d = 1 for an integer exponent)."""
    known, bits = int(prefix), _BITS
    while True:
        known = (known << 62) | int(gen.integers(0, 2**62))
        bits += 62
        c = exp_neg_frac_floor(a, d, bits) if a <= d else _int_floor(a // d, bits)
        if known != c:
            return known < c


def decide_exp(
    fl: NDArray[np.int64],
    rem: NDArray[np.int64],
    tables: ExpTables,
    words: NDArray[np.int64],
    gen: np.random.Generator,
) -> NDArray[np.bool_]:
    """[U_f < p_f for every factor f] per column, given the uniforms' 62-bit prefixes.

    ``words`` has shape (J + 1, n) (row 0 for e^{−F}, row 1 + j for digit j) with entries in
    [0, 2^62); ``fl`` = F ≥ 0 and ``rem`` = r ∈ [0, D) per column. Columns where no factor
    fails and some factor ties continue exactly (:func:`_below_exp_neg`), drawing from
    ``gen``.
    """
    n = fl.size
    c = np.empty((tables.rows, n), dtype=np.int64)
    np.take(_INT_TABLE, fl, out=c[0], mode="clip")  # index min(F, 43): c_43 = 0
    if tables.rows > 1:
        idx = (rem >> tables.shifts) & ((1 << tables.digit_bits) - 1)
        idx += tables.offsets
        np.take(tables.table, idx, out=c[1:], mode="clip")
    np.subtract(c, words, out=c)  # > 0: U_f < p_f; < 0: U_f > p_f; 0: tie
    low = c.min(axis=0)
    out = low > 0
    if not (low == 0).any():
        return out
    for i in np.flatnonzero(low == 0):  # no factor fails, some tie: exact continuation
        ok = True
        for f in np.flatnonzero(c[:, i] == 0):
            if f == 0:
                ok = _below_exp_neg(int(words[0, i]), int(fl[i]), 1, gen)
            else:
                sh = tables.digit_bits * (int(f) - 1)
                v = (int(rem[i]) >> sh) & ((1 << tables.digit_bits) - 1)
                ok = _below_exp_neg(int(words[f, i]), v << sh, tables.den, gen)
            if not ok:
                break
        out[i] = ok
    return out


def accept_exp(
    fl: NDArray[np.int64], rem: NDArray[np.int64], den: int, gen: np.random.Generator
) -> NDArray[np.bool_]:
    """Independent exact Bernoulli(exp(−(fl + rem/den))) per entry (module docstring).

    ``fl`` ≥ 0 and 0 ≤ ``rem`` < ``den`` ≤ 2^62 (int64 arrays, trusted). Draws J + 1
    uniform 64-bit words per entry from ``gen``'s bit generator (their top 62 bits), plus
    further words only on ties.
    """
    tables = exp_tables(int(den))
    n = fl.size
    raw = gen.bit_generator.random_raw(tables.rows * n)
    words = (raw >> np.uint64(64 - _BITS)).view(np.int64).reshape(tables.rows, n)
    return decide_exp(fl, rem, tables, words, gen)

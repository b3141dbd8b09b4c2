"""Exact table-based Bernoulli(exp(−E)) of the discrete Gaussian sampler (``_exp_tables``).

The tables are checked entry by entry against an independent exact computation
(``decimal`` at 120 digits, far finer than the 2^-62 resolution, with a margin check), the
fallbacks are forced (low builder precision; injected ties), and the acceptance
frequencies are checked against exp(−E) with binomial bounds at the 1e-6 level.
"""

from __future__ import annotations

import decimal
import math

import numpy as np
import pytest
from scipy import stats

from dpfair.mechanisms import _exp_tables as et
from tests._stats import FAIL_PROB


def _floor_decimal(a: int, d: int, bits: int) -> int:
    """⌊e^{−a/d}·2^bits⌋ from 120-digit decimal arithmetic (asserts it is not near a tie)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 120
        val = (-(decimal.Decimal(a) / decimal.Decimal(d))).exp() * (decimal.Decimal(2) ** bits)
        f = int(val)  # val > 0: truncation is the floor
        assert val - f > decimal.Decimal(10) ** -20 and f + 1 - val > decimal.Decimal(10) ** -20
        return f


@pytest.mark.parametrize("den", [2, 7, 1000, 2 * 25571328, 2 * 4**25 * 3 + 6, 2**62])
def test_tables_match_independent_exact_values(den):
    """Every digit-table entry is ⌊2^62 e^{−v·2^{bj}/D}⌋ (sampled entries, all digits)."""
    tb = et._build(den, et._DIGIT_BITS, et._PREC)
    n_digits = tb.rows - 1
    assert 2 ** (et._DIGIT_BITS * n_digits) >= den > 2 ** (et._DIGIT_BITS * (n_digits - 1))
    ends = [int(o) for o in tb.offsets[:, 0]] + [tb.table.size]
    g = np.random.default_rng(0)
    for j in range(n_digits):
        size = ends[j + 1] - ends[j]
        assert size == min(2**et._DIGIT_BITS, ((den - 1) >> (et._DIGIT_BITS * j)) + 1)
        vs = {0, 1, size - 1, *g.integers(0, size, 20).tolist()}
        for v in sorted(vs):
            a = v << (et._DIGIT_BITS * j)
            want = 2**62 if a == 0 else _floor_decimal(a, den, 62)
            assert int(tb.table[ends[j] + v]) == want, (den, j, v)


def test_int_table_and_exact_floor_function():
    for f in (0, 1, 2, 17, 42, 43):
        want = 2**62 if f == 0 else (0 if f == 43 else _floor_decimal(f, 1, 62))
        assert int(et._INT_TABLE[f]) == want
    assert et._int_floor(50, 200) == _floor_decimal(50, 1, 200)
    for a, d, bits in [(1, 3, 62), (5, 7, 124), (2**40 + 1, 2**41, 186), (1, 1, 62)]:
        assert et.exp_neg_frac_floor(a, d, bits) == _floor_decimal(a, d, bits)
    assert et.exp_neg_frac_floor(0, 5, 62) == 2**62
    with pytest.raises(ValueError):
        et.exp_neg_frac_floor(6, 5, 62)


def test_builder_fallback_is_forced_and_exact(monkeypatch):
    """At 66 bits of working precision most entries straddle an integer and are recomputed
    by ``exp_neg_frac_floor``; the table is identical to the 128-bit one."""
    calls = []
    real = et.exp_neg_frac_floor

    def counting(a, d, bits):
        calls.append((a, d))
        return real(a, d, bits)

    monkeypatch.setattr(et, "exp_neg_frac_floor", counting)
    den = 2 * 25571328
    low = et._build(den, et._DIGIT_BITS, 66)
    assert len(calls) > 100  # the fallback really ran
    calls.clear()
    high = et._build(den, et._DIGIT_BITS, et._PREC)
    assert np.array_equal(low.table, high.table)


def _tie_words(fl, rem, tb):
    """Uniform prefixes that tie every factor (u_f = ⌊2^62 p_f⌋) for one column."""
    w = [int(et._INT_TABLE[min(fl, et._INT_MAX)])]
    for j in range(tb.rows - 1):
        v = (rem >> (tb.digit_bits * j)) & ((1 << tb.digit_bits) - 1)
        w.append(int(tb.table[int(tb.offsets[j, 0]) + v]))
    return np.array(w, dtype=np.int64).reshape(-1, 1)


def _frac_after_tie(a: int, d: int) -> float:
    """P(U < p | first 62 bits of U = ⌊2^62 p⌋) = frac(2^62 p), p = e^{−a/d} (a ≤ d, or
    d = 1 for an integer exponent)."""
    if a <= d:
        hi, lo = et.exp_neg_frac_floor(a, d, 124), et.exp_neg_frac_floor(a, d, 62)
    else:
        hi, lo = et._int_floor(a // d, 124), et._int_floor(a // d, 62)
    return (hi - (lo << 62)) / 2**62


def test_tie_continuation_law():
    """Forced ties: accept frequency equals Π_f frac(2^62 p_f) over the tied factors."""
    den = 2 * 25571328
    tb = et.exp_tables(den)
    g = np.random.default_rng(21)
    n = 3000
    cases = [(0, 5 + (3 << 9) + (150 << 18), [1, 2, 3]), (1, 0, [0]), (2, 7, [0, 1])]
    for fl, rem, tied in cases:
        words = _tie_words(fl, rem, tb)
        for f in range(tb.rows):  # untie the others: u = 0 < p_f decides them (accept)
            if f not in tied:
                words[f, 0] = 0
        p = 1.0
        for f in tied:
            if f == 0:
                p *= _frac_after_tie(fl, 1)
            else:
                sh = tb.digit_bits * (f - 1)
                p *= _frac_after_tie(((rem >> sh) & ((1 << tb.digit_bits) - 1)) << sh, den)
        hits = sum(
            bool(et.decide_exp(np.array([fl]), np.array([rem]), tb, words.copy(), g)[0])
            for _ in range(n)
        )
        lo, hi = stats.binom.ppf(FAIL_PROB / 2, n, p), stats.binom.isf(FAIL_PROB / 2, n, p)
        assert lo <= hits <= hi, (fl, rem, hits, p)


def test_tie_on_a_rejecting_column_draws_nothing():
    """A tie next to a failed factor is not continued (the product is already 0)."""
    tb = et.exp_tables(1000)
    words = _tie_words(0, 5, tb)
    words[1, 0] = 2**62 - 1  # factor 1 fails: u ≥ ⌊2^62 p⌋ + 1
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    assert not et.decide_exp(np.array([0]), np.array([5]), tb, words, g)[0]
    assert g.bit_generator.state == state


def test_large_floor_exponent_tie():
    """⌊E⌋ ≥ 43 has c = 0: u ≥ 1 rejects, u = 0 ties and continues exactly:
    P(U < e^{−43} | u = 0) = 2^62e^{−43} ≈ 0.97, while e^{−60}2^62 < 1e-7 and ⌊E⌋ = 2^62
    (the cap) never accepts."""
    tb = et.exp_tables(1000)
    g = np.random.default_rng(1)
    one = np.ones((tb.rows, 1), dtype=np.int64)
    n = 2000
    hits = {}
    for fl in (43, 60, 2**62):
        words = np.zeros((tb.rows, 1), dtype=np.int64)
        hits[fl] = sum(
            bool(et.decide_exp(np.array([fl]), np.array([0]), tb, words.copy(), g)[0])
            for _ in range(n)
        )
        assert not et.decide_exp(np.array([fl]), np.array([0]), tb, one, g)[0]
    p = math.exp(-43) * 2**62
    assert stats.binom.ppf(FAIL_PROB / 2, n, p) <= hits[43] <= stats.binom.isf(FAIL_PROB / 2, n, p)
    assert hits[60] <= 1 and hits[2**62] == 0


@pytest.mark.parametrize("den", [1, 3, 1000, 2 * 25571328, 2**62])
def test_accept_frequency_matches_exp(den):
    """#accept of Bernoulli(exp(−(F + r/D))) against Binomial(n, e^{−E}), two-sided at 1e-6."""
    g = np.random.default_rng(den % 1000 + 3)
    n = 40_000
    for fl, rem in [(0, den // 3), (0, den - 1), (1, den // 2), (3, 0), (0, 0)]:
        rem = min(rem, den - 1)
        hits = int(et.accept_exp(np.full(n, fl), np.full(n, rem), den, g).sum())
        p = math.exp(-(fl + rem / den))
        lo, hi = stats.binom.ppf(FAIL_PROB / 2, n, p), stats.binom.isf(FAIL_PROB / 2, n, p)
        assert lo <= hits <= hi, (den, fl, rem, hits, n * p)


def test_accept_detects_a_wrong_table(monkeypatch):
    """Power: a table off by 1 % in one digit factor is caught by the same bound."""
    den = 2 * 25571328
    tb = et._build(den, et._DIGIT_BITS, et._PREC)
    bad = et.ExpTables(tb.den, tb.digit_bits, tb.shifts, tb.offsets,
                       (tb.table * 0.99).astype(np.int64))
    monkeypatch.setattr(et, "exp_tables", lambda d: bad)
    g = np.random.default_rng(4)
    n = 40_000
    rem = 300 << 18
    hits = int(et.accept_exp(np.zeros(n, dtype=np.int64), np.full(n, rem), den, g).sum())
    p = math.exp(-rem / den)
    lo, hi = stats.binom.ppf(FAIL_PROB / 2, n, p), stats.binom.isf(FAIL_PROB / 2, n, p)
    assert not lo <= hits <= hi

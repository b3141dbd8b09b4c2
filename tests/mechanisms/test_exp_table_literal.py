"""The discrete Gaussian's written-out table c_v = ⌊e^{−v}·2^62⌋ is the exact one.

The table used to be computed at import (exact rational arithmetic, ~20 ms of every command's
start-up, issue 23 item 7); it is now a literal, checked here against the exact function and
against an independent integer-only evaluation.
"""

from __future__ import annotations

from fractions import Fraction

import dpfair.mechanisms.discrete_gaussian as dg


def test_literal_table_equals_the_exact_floor() -> None:
    dg._exp_neg_floor.cache_clear()
    assert dg._EXP_TABLE == [dg._exp_neg_floor(v, 62) for v in range(43)]
    assert len(dg._EXP_TABLE) == dg._VMAX + 1 and dg._EXP_TABLE[-1] == 2


def test_literal_table_brackets_e_to_the_minus_v() -> None:
    # Independent check: e^{-v} lies between consecutive partial sums of its alternating
    # series once the terms decrease, so c_v ≤ e^{-v}·2^62 < c_v + 1 can be certified with
    # rationals taken far enough (100 terms past v).
    for v, c in enumerate(dg._EXP_TABLE):
        total, term = Fraction(0), Fraction(1)
        for k in range(2 * v + 200):
            total += term
            term = term * (-v) / (k + 1)
        lo, hi = sorted((total, total + term))
        scale = 1 << 62
        assert c <= lo * scale and hi * scale < c + 1, v

"""The CDP-Fair threshold's uniform point is drawn inside a *public* cell (issue 11).

A piece of the threshold law runs between public points, but which lattice points are
piece edges depends on the data. Computing lo + u·(hi − lo) from the piece would round on
a data-dependent grid: piece [−½, ½] only reaches even multiples of 2^-54 in [−½, −¼),
its halves also reach the odd ones. ``_public_cell`` removes that: the point is computed
from a cell of the finest public partition, chosen exactly ∝ its length.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import stats

from dpfair.fairclass._threshold import SCORE_LATTICE_BINS, _public_cell
from dpfair.mechanisms.exact_choice import exact_rate
from tests._stats import FAIL_PROB

H = 2.0 / SCORE_LATTICE_BINS
RATE = exact_rate(1.0)


def _is_lattice(v: float) -> bool:
    return ((Fraction(v) + 1) / Fraction(H)).denominator == 1


def _old_point(lo: float, hi: float, gen: np.random.Generator) -> float:
    return float(min(lo + gen.random() * (hi - lo), hi))


def _new_point(lo: float, hi: float, gen: np.random.Generator) -> float:
    a, b = _public_cell(lo, hi, RATE, gen)
    return float(min(a + gen.random() * (b - a), b))


def _odd_in_quarter(x: float) -> bool:
    """x in [−½, −¼) and an odd multiple of 2^-54 (unreachable from lo + u·1 at lo = −½)."""
    return -0.5 <= x < -0.25 and (Fraction(x) * 2**54).numerator % 2 == 1


def test_cells_are_public_and_inside_the_piece():
    gen = np.random.default_rng(0)
    for lo, hi in [(-0.3, 0.25), (-0.5, 0.5), (0.0, H), (-0.3, -0.3 + H / 3), (-1.0, 1.0)]:
        for _ in range(200):
            a, b = _public_cell(lo, hi, RATE, gen)
            assert lo <= a < b <= hi and b - a <= H
            assert (a == lo or _is_lattice(a)) and (b == hi or _is_lattice(b))


def test_the_data_dependent_rounding_grid_is_gone():
    """Power on the old computation, and the same statistic on the new one."""
    n = 4000
    old_whole = [_old_point(-0.5, 0.5, np.random.default_rng(s)) for s in range(n)]
    old_half = [_old_point(-0.5, 0.0, np.random.default_rng(s)) for s in range(n)]
    assert not any(_odd_in_quarter(x) for x in old_whole)  # impossible for the whole piece
    assert sum(_odd_in_quarter(x) for x in old_half) > 200  # common for its half
    new_whole = [_new_point(-0.5, 0.5, np.random.default_rng(s)) for s in range(n)]
    new_half = [_new_point(-0.5, 0.0, np.random.default_rng(s)) for s in range(n)]
    # the same cell computation for both: odd multiples are reachable from either piece
    assert sum(_odd_in_quarter(x) for x in new_whole) > 100
    assert sum(_odd_in_quarter(x) for x in new_half) > 200


def test_cell_choice_is_proportional_to_length():
    lo, hi = -0.3, -0.3 + 5.5 * H  # partial first cell, 4 full cells, partial last cell
    gen = np.random.default_rng(1)
    n = 60_000
    firsts = np.array([_public_cell(lo, hi, RATE, gen)[0] for _ in range(n)])
    cells = np.unique(firsts)
    edges = np.append(cells, hi)
    p = np.diff([Fraction(e) for e in edges]) / (Fraction(hi) - Fraction(lo))
    assert math.isclose(float(sum(p)), 1.0)
    counts = np.array([np.count_nonzero(firsts == c) for c in cells])
    per = FAIL_PROB / (2 * cells.size)
    for c, pk in zip(counts, p, strict=True):
        lo_b = stats.binom.ppf(per, n, float(pk))
        hi_b = stats.binom.isf(per, n, float(pk))
        assert lo_b <= c <= hi_b, (c, float(pk) * n)


def test_raw_scores_through_the_public_api_cannot_leak_their_last_bits():
    """The attacker's case (review of issue 11): a raw calibration score as a piece edge.

    D has one group-0 score at 1e-10, D′ moves it by 2^-70 (its last 16 mantissa bits).
    ``private_fair_threshold`` now rounds scores to the public lattice itself, so both give
    bit-identical thresholds under common seeds; before, 77 of 400 draws on D were
    impossible under D′ by an exact reachability oracle.
    """
    from dpfair.fairclass import private_fair_threshold

    r = 2.0**-15
    z1 = np.full(50, 0.9)

    def z0(v: float) -> np.ndarray:
        return np.concatenate(([v], np.full(50, -0.9)))

    for s in range(200):
        a = private_fair_threshold(z1, z0(1e-10), 50.0, 51.0, 0.0, 400.0, r, rng=s).tau
        b = private_fair_threshold(z1, z0(1e-10 + 2.0**-70), 50.0, 51.0, 0.0, 400.0, r,
                                   rng=s).tau
        assert a == b

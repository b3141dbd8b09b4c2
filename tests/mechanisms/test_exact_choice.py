"""The exact piece sampler (``dpfair.mechanisms.exact_choice``): its law is the exact law.

Every statistical check uses fixed seeds and bounds that a correct sampler violates with
probability < FAIL_PROB (chi-square p-value, exact binomial quantiles). The slow path is
exercised by the test hook ``_FAST_PATH_SLACK`` (a huge extra error on every fast-path
bound, so that the fast path can decide almost nothing) and by direct calls with chosen
first words next to an exact boundary.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpfair.mechanisms.exact_choice as ec
from dpfair._errors import InvalidParameterError
from dpfair.mechanisms.exact_choice import PieceMasses, choose_pieces, exact_rate
from tests._stats import FAIL_PROB


def _exact_probs(m, d, c) -> np.ndarray:
    """w_j = M_j e^{−c d_j} normalised, in 50-digit decimal (independent of the sampler)."""
    ctx = decimal.Context(prec=50)
    w = [ctx.multiply(decimal.Decimal(float(mi)),
                      ctx.exp(-ctx.divide(decimal.Decimal(c.numerator * int(di)),
                                          decimal.Decimal(c.denominator))))
         for mi, di in zip(m, d, strict=True)]
    tot = sum(w, decimal.Decimal(0))
    return np.array([float(x / tot) for x in w])


def _chi2_ok(draws: np.ndarray, probs: np.ndarray) -> bool:
    observed = np.bincount(draws, minlength=probs.size).astype(float)
    keep = probs > 0
    assert observed[~keep].sum() == 0  # never a zero-mass piece
    expected = probs[keep] * draws.size
    return stats.chisquare(observed[keep], expected).pvalue > FAIL_PROB


@pytest.fixture
def slow_path(monkeypatch):
    """Make the fast path undecided almost always and count the slow-path calls."""
    calls = []
    original = ec._slow

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ec, "_FAST_PATH_SLACK", 0.5)
    monkeypatch.setattr(ec, "_slow", counted)
    return calls


M = np.array([3.0, 1.0, 0.0, 7.0, 2.0, 5.0])
D = np.array([2, 0, 0, 3, 1, 6])


def test_fast_path_law_equals_the_exact_law():
    c = exact_rate(1.3)
    draws = choose_pieces(PieceMasses.exact_floats(M), D, c, rng=1, size=200_000)
    assert _chi2_ok(draws, _exact_probs(M, D, c))


def test_slow_path_law_equals_the_exact_law(slow_path):
    c = exact_rate(1.3)
    draws = choose_pieces(PieceMasses.exact_floats(M), D, c, rng=2, size=3000)
    assert len(slow_path) > 2500  # the slow path decided (almost) every draw
    assert _chi2_ok(draws, _exact_probs(M, D, c))


def test_reject_outcome_with_a_dominating_total(slow_path):
    """T = 10 > Σw = 2: the "none" outcome K has probability 0.8 exactly."""
    m = PieceMasses.exact_floats([1.0, 1.0])
    for paths, n in ((False, 20_000), (True, 2000)):
        if not paths:
            ec._FAST_PATH_SLACK = 0.0
        else:
            ec._FAST_PATH_SLACK = 0.5
        draws = choose_pieces(m, [0, 0], exact_rate(1.0), rng=3, size=n, total=(Fraction(10), 0))
        assert _chi2_ok(draws, np.array([0.1, 0.1, 0.8]))


def test_single_nonzero_piece_both_paths(slow_path):
    m = PieceMasses.exact_floats([0.0, 0.0, 5.0, 0.0])
    assert np.all(choose_pieces(m, [0, 3, 9, 1], exact_rate(2.0), rng=4, size=500) == 2)
    ec._FAST_PATH_SLACK = 0.0
    assert np.all(choose_pieces(m, [0, 3, 9, 1], exact_rate(2.0), rng=4, size=5000) == 2)


def test_masses_near_underflow():
    """Subnormal multiplicities (the absolute allowance dominates: the slow path decides)
    and exponents past the fast path's cut-off (t > 700) keep the exact law."""
    tiny = PieceMasses.exact_floats([5e-324, 1e-323, 0.0])  # 1 : 2 : 0
    draws = choose_pieces(tiny, [0, 0, 0], exact_rate(1.0), rng=5, size=1500)
    assert _chi2_ok(draws, np.array([1 / 3, 2 / 3, 0.0]))
    # c·d = 700 and 710: weights e^-700, e^-710 next to 1; and two pieces beyond the cut
    # whose masses dominate among themselves (all pieces shifted by the same offset).
    c = Fraction(1, 2)
    deep = PieceMasses.exact_floats([1.0, 2.0**1000, 2.0**1000])
    draws = choose_pieces(deep, [0, 1400, 1420], c, rng=6, size=20_000)
    assert _chi2_ok(draws, _exact_probs([1.0, 2.0**1000, 2.0**1000], [0, 1400, 1420], c))
    far = PieceMasses.exact_floats([1.0, 3.0])
    draws = choose_pieces(far, [2000, 2000], c, rng=7, size=20_000)  # both beyond 700
    assert _chi2_ok(draws, np.array([0.25, 0.75]))


def test_masses_differing_by_1e15_relative_are_ordered_exactly():
    """Two pieces of masses a = 3·10^15 and a + 2 (relative difference 7e-16): the first
    words around the exact boundary U* = a/(2a + 2) go to the slow path and are decided
    exactly (the boundary word itself is decided by the next word)."""
    a, b = 3 * 10**15, 3 * 10**15 + 2
    m = PieceMasses.exact_floats([float(a), float(b)])
    d = np.array([0, 0], dtype=np.int64)
    c = Fraction(1, 2)
    boundary = Fraction(a, a + b) * 2**64  # U·T = C_1 at U = a/(a+b)
    w_star = math.floor(boundary)
    gen = np.random.default_rng(8)
    assert ec._slow(m, d, c, None, w_star - 1, gen) == 0
    assert ec._slow(m, d, c, None, w_star + 1, gen) == 1
    assert ec._fast(m, d, c, None, np.array([w_star - 1], dtype=np.uint64))[1][0]  # undecided
    # The boundary word itself: decided by the next word V of U = (w* + V/2^64)/2^64,
    # piece 0 iff V/2^64 < frac (exact prediction from a copy of the generator).
    frac = boundary - w_star
    seen = set()
    for s in range(20):
        v = int(np.random.default_rng(s).integers(0, 2**64 - 1, dtype=np.uint64,
                                                   endpoint=True))
        expected = 0 if Fraction(v + 1, 2**64) <= frac else 1
        assert ec._slow(m, d, c, None, w_star, np.random.default_rng(s)) == expected
        seen.add(expected)
    assert seen == {0, 1}


def test_irrational_boundary_is_decided_exactly():
    """Masses 1 and e^{-c} with c = 3/7: the first word just below/above the exact boundary
    U* = 1/(1 + e^{-3/7}) (computed here at 60 digits) decides the piece exactly."""
    m = PieceMasses.exact_floats([1.0, 1.0])
    d = np.array([0, 1], dtype=np.int64)
    c = Fraction(3, 7)
    ctx = decimal.Context(prec=60)
    u_star = ctx.divide(1, ctx.add(1, ctx.exp(ctx.divide(-3, 7))))
    w_star = int(ctx.multiply(u_star, decimal.Decimal(2**64))
                 .to_integral_value(decimal.ROUND_FLOOR))
    gen = np.random.default_rng(9)
    assert ec._slow(m, d, c, None, w_star - 1, gen) == 0
    assert ec._slow(m, d, c, None, w_star + 1, gen) == 1


def test_output_depends_only_on_masses_and_units():
    """Same (M, d, c) from different arrays (and unit offsets shifted by a constant): the
    same draws under a common seed."""
    c = exact_rate(0.9)
    a = choose_pieces(PieceMasses.exact_floats(M), D, c, rng=10, size=1000)
    b = choose_pieces(PieceMasses.exact_floats(M.copy()), D + 17, c, rng=10, size=1000)
    assert np.array_equal(a, b)
    edges = np.concatenate(([0.0], np.cumsum(M)))
    e = choose_pieces(PieceMasses.lengths(edges), D, c, rng=10, size=1000)
    assert np.array_equal(a, e)  # integer lengths between binary64 edges: the same masses


def test_lengths_between_edges_are_exact():
    e = np.array([0.1, 0.3, 0.3, 0.7])
    m = PieceMasses.lengths(e)
    assert m.exact(0) == Fraction(0.3) - Fraction(0.1)
    assert m.exact(1) == 0
    assert abs(float(m.approx[0]) - float(m.exact(0))) <= 2.0**-53 * float(m.exact(0))
    h = PieceMasses.lengths(e, [2.0, 1.0, 0.5])
    assert h.exact(2) == (Fraction(0.7) - Fraction(0.3)) / 2


def test_exact_rate_never_exceeds_the_stated_epsilon():
    for eps in (1e-3, 0.1, math.sqrt(2.0), 1.0, 7.3, 50.0):
        for s in (1, 2, 3, 2**20 + 7):
            c = exact_rate(eps, s)
            eff = 2 * c * s
            assert eff <= Fraction(eps) * (1 - Fraction(1, 2**51))
            assert eff**2 / 8 <= Fraction(eps**2 / 8)  # the zCDP number the ledger records
            assert eff >= Fraction(eps) * (1 - Fraction(1, 2**49))


def test_invalid_inputs_raise():
    m = PieceMasses.exact_floats([1.0])
    with pytest.raises(InvalidParameterError):
        choose_pieces(PieceMasses.exact_floats([0.0]), [0], Fraction(1), rng=0)
    with pytest.raises(InvalidParameterError):
        choose_pieces(m, [-1], Fraction(1), rng=0)
    with pytest.raises(InvalidParameterError):
        choose_pieces(m, [0], Fraction(0), rng=0)
    with pytest.raises(InvalidParameterError):
        PieceMasses.exact_floats([-1.0])
    with pytest.raises(InvalidParameterError):
        exact_rate(0.0)


def test_slow_path_rarely_runs_in_production(monkeypatch):
    """At production settings, 10^5 draws over 1001 pieces never need the slow path
    (its probability is ~K·10^-13 per draw)."""
    calls = []
    monkeypatch.setattr(ec, "_slow", lambda *a, **k: calls.append(1) or 0)
    d = np.abs(np.arange(1001) - 500)
    choose_pieces(PieceMasses.exact_floats(np.ones(1001)), d, exact_rate(1.0), rng=11,
                  size=100_000)
    assert not calls


def test_zero_mass_pieces_do_not_set_the_scale(monkeypatch):
    """A tie block: empty pieces with small offsets and the mass far away (c·d = 2500): the
    common factor comes from the pieces with mass, so the fast path decides every draw."""
    calls = []
    original = ec._slow
    monkeypatch.setattr(ec, "_slow", lambda *a, **k: calls.append(1) or original(*a, **k))
    m = np.zeros(1001)
    m[0], m[-1] = 1.0, 3.0
    d = np.minimum(np.abs(np.arange(1001) - 500), 5000)
    d[0] = d[-1] = 5000
    draws = choose_pieces(PieceMasses.exact_floats(m), d, Fraction(1, 2), rng=12, size=20_000)
    assert not calls
    assert _chi2_ok(draws, m / m.sum())

"""Floating-point attacks on the facility DPExpMed release (issue 11).

The release is: a piece [a, b] of the exponential mechanism on the computed edges
fl(x_i ∓ αm) chosen by the exact sampler, then a public cell chosen *exactly* with
probability |[a, b] ∩ cell| / (b − a) (``_choose_cells``), then a uniform point of that
cell from public numbers only. These tests check, as an adversary would, that

* the issue-style pair gives bit-identical releases when its computed profile is equal,
  and otherwise an executed cell law within e^ε (checked by rigorous rational interval
  arithmetic, not by floating-point logs);
* the cell choice has exactly the overlap law, on pieces much shorter than a cell, on
  pieces that straddle a cell edge by one ulp, on the exact (rational) branch, and through
  ``DPExpMed.sample`` against ``distribution(x)``;
* the replaced computation (cell of fl(a + u(b − a))) did land in the wrong cell on a
  crafted case, which the exact choice gets right.
"""

from __future__ import annotations

import decimal
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpfair.facility._mechanism as fm
from dpfair.facility import DPExpMed
from dpfair.facility._metrics import loss_cap, median_index
from dpfair.mechanisms.exact_choice import exact_rate
from tests._stats import FAIL_PROB

DOMAIN = (0.0, 1.0)
GRID = fm._OutputGrid.for_domain(*DOMAIN)
THETA = GRID.cell  # 2^-44


def _issue_pair() -> tuple[np.ndarray, np.ndarray]:
    x = np.concatenate((np.full(26, 0.001), np.full(74, 0.9)))
    x_prime = x.copy()
    x_prime[0] = 0.001 + 1e-12
    return x, x_prime


# ------------------------------------------------------------------ helpers
def _binomial_ok(count: int, n: int, p: float, fail_prob: float) -> bool:
    """Two-sided exact binomial acceptance at total false-alarm probability ``fail_prob``."""
    lo = stats.binom.ppf(fail_prob / 2, n, p)
    hi = stats.binom.isf(fail_prob / 2, n, p)
    return bool(lo - 1 <= count <= hi + 1)


def _check_counts(counts: dict[int, int], probs: dict[int, Fraction], n: int) -> None:
    """Every category's count is consistent with its exact probability (Bonferroni over
    categories, total false-alarm probability < FAIL_PROB); nothing outside them."""
    assert sum(counts.get(c, 0) for c in probs) == n, (counts, probs)
    for c, p in probs.items():
        got = counts.get(c, 0)
        if p == 0:
            assert got == 0
        else:
            assert _binomial_ok(got, n, float(p), FAIL_PROB / len(probs)), (c, got, float(p) * n)


def _overlap_law(a: float, b: float) -> dict[int, Fraction]:
    """Exact P(cell) = |[a, b] ∩ cell| / (b − a) over the cells that meet [a, b]."""
    ca = int(GRID.index(np.array([a]))[0])
    cb = int(GRID.index(np.array([b]))[0])
    fa, fb = Fraction(a), Fraction(b)
    out = {}
    for c in range(ca, cb + 1):
        e0 = Fraction(float(GRID.edge(c)))
        e1 = Fraction(float(GRID.edge(c + 1)))
        ov = min(fb, e1) - max(fa, e0)
        if ov > 0:
            out[c] = ov / (fb - fa)
    return out


def _counts(cells: np.ndarray) -> dict[int, int]:
    vals, cnt = np.unique(cells, return_counts=True)
    return {int(v): int(k) for v, k in zip(vals, cnt, strict=True)}


class _ScriptedGen:
    """A generator whose first 64-bit words are given; everything else from ``inner``."""

    def __init__(self, words: list[int], seed: int = 0) -> None:
        self.words = list(words)
        self.inner = np.random.default_rng(seed)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        if dtype is np.uint64 and self.words:
            if size is None:
                return np.uint64(self.words.pop(0))
            return np.array([self.words.pop(0) for _ in range(size)], dtype=np.uint64)
        return self.inner.integers(low, high, size=size, dtype=dtype, endpoint=endpoint)

    def random(self, size=None):
        return self.inner.random(size)


# ------------------------------------------------------------------ the issue-style pair
@pytest.mark.parametrize("widening", [0.1, None])
def test_issue_pair_widened_releases_are_bit_identical(widening):
    """26 agents at 0.001, 74 at 0.9, one moved by 1e-12, ε = 1: with α = 0.1 (and the
    default α* = 0.01) the moved record's edges fl(x − αm) clip to lo on both data sets and
    its upper edge is not used, so the computed profiles are equal and 400 common seeds
    give bit-identical releases, single draws and batches alike."""
    x, x_prime = _issue_pair()
    mech = DPExpMed(1.0, DOMAIN, widening=widening)
    singles = [mech.sample(x, rng=s) for s in range(400)]
    assert singles == [mech.sample(x_prime, rng=s) for s in range(400)]
    assert len(set(singles)) > 300  # the release is random: equality has power
    assert np.array_equal(mech.sample(x, rng=7, size=400), mech.sample(x_prime, rng=7, size=400))


def _edges_and_units(x: np.ndarray, widening: float) -> tuple[np.ndarray, np.ndarray]:
    xs = np.sort(x)
    n = xs.size
    k = median_index(n, "lower")
    law = fm._law_from_sorted(xs, k, widening * (DOMAIN[1] - DOMAIN[0]), 1.0, *DOMAIN)
    units = np.minimum(np.abs(np.arange(n + 2) - k), loss_cap(n, k))
    return law.edges, units


def _cell_masses(
    edges: np.ndarray, units: np.ndarray, cells: list[int]
) -> list[dict[int, Fraction]]:
    """Exact unnormalised cell masses as {loss: length} (the weight is Σ length·q^loss)."""
    fe = [Fraction(float(e)) for e in edges]
    out = []
    for c in cells:
        e0, e1 = Fraction(float(GRID.edge(c))), Fraction(float(GRID.edge(c + 1)))
        m: dict[int, Fraction] = {}
        for j in range(len(fe) - 1):
            ov = min(e1, fe[j + 1]) - max(e0, fe[j])
            if ov > 0:
                m[int(units[j])] = m.get(int(units[j]), Fraction(0)) + ov
        out.append(m)
    return out


def _poly(m: dict[int, Fraction], q: Fraction) -> Fraction:
    return sum((v * q**d for d, v in m.items()), Fraction(0))


def test_issue_pair_unwidened_executed_cell_law_ratio_is_within_e_eps():
    """α = 0: the moved record's edge moves by ~17 cells, so the profiles differ. The
    executed cell law is P(c) = Σ_j |piece_j ∩ c|·q^{d_j} / Σ_j |piece_j|·q^{d_j},
    q = e^{−r} with the executed rate r = exact_rate(ε). For every cell where the laws can
    differ in ratio (cells holding an edge of either law, and one cell of every run of
    cells between them) we certify q²·N_D(c)·Z_{D'} ≤ N_{D'}(c)·Z_D (ratio ≤ e^{2r} ≤ e^ε)
    in both directions by rational interval arithmetic: all coefficients are ≥ 0, so
    enclosing q in [q_lo, q_hi] bounds each side monotonically."""
    x, x_prime = _issue_pair()
    e_d, u_d = _edges_and_units(x, 0.0)
    e_p, u_p = _edges_and_units(x_prime, 0.0)
    assert not np.array_equal(e_d, e_p)
    special = set()
    for e in np.concatenate((e_d, e_p)):
        c = int(GRID.index(np.array([e]))[0])
        special.update({max(c - 1, 0), c})
    special_sorted = sorted(special)
    cells = set(special_sorted)
    for c0, c1 in itertools.pairwise(special_sorted):
        if c1 > c0 + 1:
            cells.add(c0 + 1)  # a representative of the run of plain cells
    cells_l = sorted(cells)
    n_d = _cell_masses(e_d, u_d, cells_l)
    n_p = _cell_masses(e_p, u_p, cells_l)
    fe_d = [Fraction(float(e)) for e in e_d]
    fe_p = [Fraction(float(e)) for e in e_p]
    z_d, z_p = {}, {}
    for fe, u, z in ((fe_d, u_d, z_d), (fe_p, u_p, z_p)):
        for j in range(len(fe) - 1):
            z[int(u[j])] = z.get(int(u[j]), Fraction(0)) + fe[j + 1] - fe[j]
    rate = exact_rate(1.0)
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        qd = (-decimal.Decimal(rate.numerator) / decimal.Decimal(rate.denominator)).exp()
    q_lo = Fraction(qd) * (1 - Fraction(1, 10**35))
    q_hi = Fraction(qd) * (1 + Fraction(1, 10**35))
    worst = 0.0
    for a_d, a_p in zip(n_d, n_p, strict=True):
        for num, den, z_num, z_den in ((a_d, a_p, z_p, z_d), (a_p, a_d, z_d, z_p)):
            # P_num(c) ≤ e^{2r}·P_den(c)  ⇔  q²·N_num(c)·Z_den ≤ N_den(c)·Z_num
            lhs = q_hi**2 * _poly(num, q_hi) * _poly(z_num, q_hi)
            rhs = _poly(den, q_lo) * _poly(z_den, q_lo)
            assert lhs <= rhs
            if _poly(den, q_lo) > 0:
                worst = max(worst, float(_poly(num, q_hi) * _poly(z_num, q_hi)
                                         / (_poly(den, q_lo) * _poly(z_den, q_lo))))
    assert 1.0 < worst < math.exp(1.0)  # the laws do differ, within e^ε
    # and the attack's reachability question: every released location of D is a cell of
    # positive probability under D' (the executed law has full support on the cells)
    draws = DPExpMed(1.0, DOMAIN, widening=0.0).sample(x, rng=3, size=400)
    c = GRID.index(draws)
    assert np.all((GRID.edge(c) <= draws) & (draws <= GRID.edge(c + 1)))
    masses_p = _cell_masses(e_p, u_p, sorted(set(c.tolist())))
    assert all(sum(m.values()) > 0 for m in masses_p)


# ------------------------------------------------------------------ the cell choice law
def _cells_for(a: float, b: float, n: int, seed: int) -> np.ndarray:
    return fm._choose_cells(GRID, np.full(n, a), np.full(n, b), np.random.default_rng(seed))


def test_piece_much_shorter_than_a_cell_inside_it_gives_that_cell():
    """A piece of 3 ulps in the middle of a cell: every draw releases that cell."""
    a = 0.5 + 100 * THETA + 37 * 2.0**-53
    b = a + 3 * 2.0**-53
    cells = _cells_for(a, b, 1000, 0)
    assert np.all(cells == 2**43 + 100)
    gen = np.random.default_rng(0)
    assert all(fm._choose_cell1(GRID, a, b, gen) == 2**43 + 100 for _ in range(200))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # much shorter than a cell (4 ulps), straddling the edge 0.5: 3/4 left, 1/4 right
        (0.5 - 3 * 2.0**-54, 0.5 + 2.0**-53),
        # straddling by one ulp on the left, then one whole cell and a full last cell
        (np.nextafter(0.5, 0.0), 0.5 + 2 * THETA),
        # a two-cell block and a last partial of one ulp
        (0.5, np.nextafter(0.5 + 3 * THETA, 1.0)),
        # a longer piece (partial first cell, a 36-cell block, partial last cell)
        (0.3 + 0.37 * THETA, 0.3 + 37.2 * THETA),
        # tiny numbers near lo = 0 (subnormal-scale edges)
        (5e-324, THETA * 1.5),
    ],
)
def test_cell_choice_law_is_the_exact_overlap_law(a, b):
    """Exact binomial per cell against |[a, b] ∩ cell| / (b − a), 200,000 draws."""
    n = 200_000
    probs = _overlap_law(float(a), float(b))
    _check_counts(_counts(_cells_for(float(a), float(b), n, 11)), probs, n)


def test_scalar_and_vector_paths_make_the_same_decisions():
    """size = 1 uses Python floats; it must draw the same cell as the vector path."""
    gen = np.random.default_rng(2)
    for _ in range(3000):
        a = float(gen.uniform(0.0, 0.999))
        b = min(1.0, a + float(gen.choice([2.0**-52, 0.3 * THETA, 2.5 * THETA, 1e-9])))
        s = int(gen.integers(1 << 40))
        one = fm._choose_cell1(GRID, a, b, np.random.default_rng(s))
        vec = fm._choose_cells(GRID, np.array([a]), np.array([b]), np.random.default_rng(s))
        assert one == int(vec[0])
        assert float(GRID.edge(one)) < b and float(GRID.edge(one + 1)) > a  # meets [a, b]


def test_exact_branch_decides_words_next_to_an_edge():
    """First words one below / at / above the exact boundary U·T = L_1 go to the exact
    branch and come out as predicted (the boundary word is decided by the next word)."""
    a, b = 0.5 - 0.3 * THETA, 0.5 + 0.2 * THETA  # first cell c0 − 1, last cell c0
    e = Fraction(0.5)
    p1 = (e - Fraction(a)) / (Fraction(b) - Fraction(a))
    w = math.floor(p1 * 2**64)  # U ∈ [w, w + 1)/2^64 contains p1
    assert Fraction(w, 2**64) < p1 < Fraction(w + 1, 2**64)
    c_left = int(GRID.index(np.array([0.5]))[0]) - 1
    calls = []
    orig = fm._cell_part_exact

    def spy(*args):
        calls.append(args)
        return orig(*args)

    mp = pytest.MonkeyPatch()
    mp.setattr(fm, "_cell_part_exact", spy)
    try:
        for word, extra, want in (
            (w - 1, [], c_left),
            (w + 1, [], c_left + 1),
            (w, [0], c_left),  # U ≈ w/2^64 + 0: below p1
            (w, [2**64 - 1], c_left + 1),  # U ≈ (w + 1)/2^64: above p1
        ):
            got = fm._choose_cell1(GRID, a, b, _ScriptedGen([word, *extra]))
            assert got == want
            got_v = fm._choose_cells(GRID, np.array([a]), np.array([b]),
                                     _ScriptedGen([word, *extra]))
            assert int(got_v[0]) == want
    finally:
        mp.undo()
    assert len(calls) == 8  # every one of these went through the exact branch


def test_exact_branch_law(monkeypatch):
    """With the fast margin inflated (test hook) nearly every draw is decided by exact
    rationals; the law is still the overlap law."""
    monkeypatch.setattr(fm, "_CELL_TOL", 0.5)
    a, b = np.nextafter(0.5 - 2 * THETA, 0.0), 0.5 + 0.9 * THETA
    n = 20_000
    calls = []
    orig = fm._cell_part_exact

    def spy(*args):
        calls.append(1)
        return orig(*args)

    monkeypatch.setattr(fm, "_cell_part_exact", spy)
    cells = _cells_for(float(a), float(b), n, 5)
    assert len(calls) > n // 20
    _check_counts(_counts(cells), _overlap_law(float(a), float(b)), n)


@pytest.mark.parametrize(("widening", "offset"), [(2.0**-46, 2.0**-47), (0.0, 2.0**-52)])
def test_sample_cell_law_equals_distribution(widening, offset):
    """Through DPExpMed.sample (windowed path, and the unwidened full-law path): n = 201,
    ε = 1, 100 agents at v = 0.5 + offset and sub-cell pieces of loss 1 and 2 just below
    it, so almost all mass lies in the two cells around the edge 0.5 (loss-0 band
    [v − θ/4, v + θ/4] when widened: 1/4 in the left cell, 3/4 in the right). The released
    cells have the probabilities of the cell-averaged law ``distribution(x)``."""
    v = 0.5 + offset
    x = np.concatenate((np.full(3, 0.2), np.full(96, v - 3 * 2.0**-52), [v - 2.0**-52],
                        np.full(100, v), [v + 2.0**-50]))
    mech = DPExpMed(1.0, DOMAIN, widening=widening)
    law = mech.distribution(x).law
    c0 = int(GRID.index(np.array([0.5]))[0])
    cuts = [float(GRID.edge(c)) for c in (c0 - 1, c0, c0 + 1)]
    cdf = [0.0, *[float(law.cdf(t)) for t in cuts], 1.0]
    probs = np.clip(np.diff(cdf), 0.0, 1.0)  # (< c0-1), c0-1, c0, (> c0)
    assert probs[1] > 0.01 and probs[2] > 0.01  # the two cells both carry real mass
    n = 100_000
    draws = mech.sample(x, rng=9, size=n)
    cats = np.searchsorted(np.array(cuts), draws, side="right")
    got = np.bincount(cats, minlength=len(probs))
    assert got.sum() == n
    for g, p in zip(got, probs, strict=True):
        assert _binomial_ok(int(g), n, float(p), FAIL_PROB / len(probs))
    singles = [mech.sample(x, rng=s) for s in range(2000)]
    got1 = np.bincount(np.searchsorted(np.array(cuts), singles, side="right"), minlength=4)
    for g, p in zip(got1, probs, strict=True):
        assert _binomial_ok(int(g), 2000, float(p), FAIL_PROB / len(probs))


# ------------------------------------------------------------------ power of the old way
def _legacy_cell(a: float, b: float, word: int) -> int:
    """The replaced release: ℓ = min(a + u(b − a), b), u = (word >> 11)·2^-53, then the
    cell of fl(ℓ)."""
    u = (word >> 11) * 2.0**-53
    ell = min(a + u * (b - a), b)
    return int(GRID.index(np.array([ell]))[0])


def _crafted_cases(limit: int) -> dict[str, list[tuple[float, float, int, int]]]:
    """(a, b, word, c) per kind: a piece [a, b] and a word whose whole 2^-53 interval of U
    puts a + U(b − a) (exact rationals) in one cell c — the piece's first cell c_a
    ("first"), or the block cell c_b − 1 just before its last cell ("last") — yet the
    cell of fl(a + u(b − a)) is the neighbour c + 1 (rounded up onto the edge)."""
    out: dict[str, list[tuple[float, float, int, int]]] = {"first": [], "last": []}
    gen = np.random.default_rng(7)
    th = Fraction(THETA)
    while min(len(v) for v in out.values()) < limit:
        a, b = sorted(float(t) for t in gen.uniform(0.0, 1.0, 2))
        if b - a < 4 * THETA:
            continue
        ja, jb = math.floor(Fraction(a) / th), math.ceil(Fraction(b) / th) - 1
        kind = ("first", "last")[int(gen.integers(2))]
        edge = th * (ja + 1 if kind == "first" else jb)
        fa, fb = Fraction(a), Fraction(b)
        mid = (edge - fa) / (fb - fa) * 2**53
        for big_b in (math.floor(mid) - 1, math.floor(mid), math.ceil(mid)):
            x0 = fa + Fraction(big_b, 2**53) * (fb - fa)
            x1 = fa + Fraction(big_b + 1, 2**53) * (fb - fa)
            want = ja if kind == "first" else jb - 1
            if kind == "last" and want <= ja:
                continue
            if not (want * th <= x0 and x1 <= (want + 1) * th):
                continue  # the interval straddles the edge: not a clean case
            word = big_b << 11
            if _legacy_cell(a, b, word) != want and len(out[kind]) < limit:
                out[kind].append((a, b, word, want))
    return out


def test_old_float_location_lands_in_the_wrong_cell_on_crafted_cases():
    """Power: for these (piece, word) the real-arithmetic location lies in one cell for the
    whole uniform interval of U, but the replaced binary64 location fl(a + u(b − a))
    rounds up onto the next cell's edge: "first" cases put the old release in the block
    instead of the first cell, "last" cases in the last cell instead of the block. The
    exact choice decides as real arithmetic: the first cell, resp. a block cell (uniform
    over the block, the block's law)."""
    cases = _crafted_cases(10)
    for kind, rows in cases.items():
        assert len(rows) == 10
        for a, b, word, want in rows:
            assert _legacy_cell(a, b, word) == want + 1, (kind, a, b, word)
            ca = int(GRID.index(np.array([a]))[0])
            one = fm._choose_cell1(GRID, a, b, _ScriptedGen([word]))
            vec = int(fm._choose_cells(GRID, np.array([a]), np.array([b]),
                                       _ScriptedGen([word]))[0])
            assert one == vec
            if kind == "first":
                assert one == want == ca
            else:  # a block cell, never the last cell want + 1 that fl gave
                assert ca < one <= want


# ------------------------------------------------------------------ the public grid
@pytest.mark.parametrize("domain", [(-0.3, 0.77), (0.0, 1.0), (-1e-300, 3e-300),
                                    (-(2.0**60), 3.0), (1e5, 1e5 + 7.0)])
def test_public_grid_is_exact_on_any_domain(domain):
    """Edges are exact, strictly increasing, interior cells exactly θ_g long, ``index`` is
    exact at and just below every edge checked, and the cell law is the overlap law on a
    piece that starts at lo (a partial first cell) and on one that holds a subnormal or
    zero end."""
    lo, hi = domain
    g = fm._OutputGrid.for_domain(lo, hi)
    th = Fraction(g.cell)
    n = g.n_cells
    cs = np.unique(np.array([0, 1, 2, 3, n // 2, n - 3, n - 2, n - 1, n]).clip(0, n))
    e = g.edge(cs)
    assert e[0] == lo and g.edge(n) == hi and np.all(np.diff(e) > 0)
    for c, ec in zip(cs, e, strict=True):
        if 0 < c < n:
            assert Fraction(float(ec)) == (g.first + int(c)) * th
            assert int(g.index(np.array([ec]))[0]) == c
            assert int(g.index(np.array([np.nextafter(ec, -np.inf)]))[0]) == c - 1
        if 0 < c < n - 1:
            assert Fraction(float(g.edge(c + 1))) - Fraction(float(ec)) == th
    b = float(g.edge(min(3, n))) if n > 3 else hi
    b = float(np.nextafter(b, np.inf)) if b < hi else b
    pieces = [(lo, b)]
    if lo < 0.0 < hi:
        pieces.append((-5e-324, float(g.edge(min(n, -g.first + 2)))))
    for a_, b_ in pieces:
        cells = fm._choose_cells(g, np.full(50_000, a_), np.full(50_000, b_),
                                 np.random.default_rng(3))
        fa, fb = Fraction(a_), Fraction(b_)
        probs = {}
        for c in range(int(g.index(np.array([a_]))[0]), int(g.index(np.array([b_]))[0]) + 1):
            ov = (min(fb, Fraction(float(g.edge(c + 1)))) - max(fa, Fraction(float(g.edge(c)))))
            if ov > 0:
                probs[c] = ov / (fb - fa)
        _check_counts(_counts(cells), probs, 50_000)
        for s in range(50):
            one = fm._choose_cell1(g, a_, b_, np.random.default_rng(s))
            vec = fm._choose_cells(g, np.array([a_]), np.array([b_]), np.random.default_rng(s))
            assert one == int(vec[0]) and one in probs
        pts = g.release(np.full(2000, a_), np.full(2000, b_), np.random.default_rng(4))
        assert np.all((pts >= a_ - 2 * g.cell) & (pts <= b_ + 2 * g.cell))
        c_pts = g.index(pts)
        assert np.all((g.edge(c_pts) <= pts) & (pts < g.edge(c_pts + 1)))

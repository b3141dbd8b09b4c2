"""Floating-point attacks (THREATS.md rule 6): neighbours that differ in the last bits of one
record must not be separated by the reachable outputs or their law.

Each attack first shows that it separates the real-arithmetic implementation (or the legacy
computation), so the check has power, then that the executed release resists it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpfair
from dpfair.median._expmech import (
    CellGrid,
    SortedCounts,
    cell_order_statistic_law,
    order_statistic_law,
    sample_order_statistic,
    sample_order_statistic_cell,
)
from tests._stats import FAIL_PROB, chisquare_pvalue

# ------------------------------------------------------------------ the issue's median attack
BOUNDS01 = (0.0, 1.0)
RHO = 0.5
EPS = 2.0 * math.sqrt(RHO)  # ε per ExpMech draw


def _issue_pair() -> tuple[np.ndarray, np.ndarray]:
    d = np.concatenate((np.full(26, 0.001), np.full(74, 0.9)))
    d_prime = d.copy()
    d_prime[0] = 0.001 + 1e-12
    return np.sort(d), np.sort(d_prime)


def _legacy_reachable(t: float, law, granularity: float) -> bool:
    """Can the real-arithmetic sampler output the double t under ``law``? Its output is
    fl(lo + fl(r·(hi − lo))) with r = k·2^-53 for the piece [lo, hi) containing t."""
    j = int(np.searchsorted(law.edges, t, side="right")) - 1
    candidates = [j, j - 1]
    for c in candidates:
        if not 0 <= c < law.n_pieces or law.piece_probabilities[c] <= 0:
            continue
        lo, hi = float(law.edges[c]), float(law.edges[c + 1])
        width = hi - lo
        if width <= 0:
            continue
        k0 = round((t - lo) / width * 2.0**53)
        for k in range(k0 - 4, k0 + 5):
            if 0 <= k < 2**53 and min(lo + (k * 2.0**-53) * width, hi) == t:
                return True
    return False


def test_issue_attack_separates_the_real_arithmetic_sampler():
    """Power: on the continuous sampler most outputs drawn on D are impossible under D'."""
    d, d_prime = _issue_pair()
    ref = dpfair.median.confidence_interval(d, rho=RHO, bounds=BOUNDS01, method="expmech",
                                            rng=0)
    theta = ref.granularity  # the default θ, as in the issue
    k = ref.diagnostics["target_ranks"][0]
    law_prime = order_statistic_law(d_prime, k, EPS, BOUNDS01, theta)
    gen = np.random.default_rng(0)
    draws = [sample_order_statistic(d, k, EPS, BOUNDS01, theta, gen) for _ in range(400)]
    impossible = sum(not _legacy_reachable(t, law_prime, theta) for t in draws)
    assert impossible > 100


def test_issue_attack_fails_on_the_released_interval():
    """The released CI: same seed ⇒ bit-identical output on D and D' (the choice depends only
    on integer cell indices); and every output on D is reachable under D' (same cell law)."""
    d, d_prime = _issue_pair()
    for seed in range(400):
        a = dpfair.median.confidence_interval(d, rho=RHO, bounds=BOUNDS01, method="expmech",
                                              rng=seed)
        b = dpfair.median.confidence_interval(d_prime, rho=RHO, bounds=BOUNDS01,
                                              method="expmech", rng=seed)
        assert (a.low, a.high) == (b.low, b.high)
    theta = a.granularity
    grid = CellGrid.for_bounds(BOUNDS01, theta)
    for k in a.diagnostics["target_ranks"]:
        p = cell_order_statistic_law(d, k, EPS, grid)
        q = cell_order_statistic_law(d_prime, k, EPS, grid)
        assert np.array_equal(p, q)


def test_released_ends_lie_on_the_public_grid():
    x = np.random.default_rng(3).lognormal(np.log(1.5), 1.0, 2000)
    r = dpfair.median.confidence_interval(x, rho=0.3, bounds=(-5.0, 15.0), method="expmech",
                                          granularity=0.005, rng=1)
    grid = CellGrid.for_bounds((-5.0, 15.0), 0.005)
    for end in (r.low, r.high):
        j = round((end - grid.low) / grid.cell)
        assert end == grid.edge(j)


# ------------------------------------------------------------------ exact ε-DP of the cells
def _max_log_ratio(x, x_prime, k, eps, grid):
    p = cell_order_statistic_law(x, k, eps, grid)
    q = cell_order_statistic_law(x_prime, k, eps, grid)
    assert np.all(p > 0) and np.all(q > 0)  # full support on the cells
    assert p.sum() == pytest.approx(1.0) and q.sum() == pytest.approx(1.0)
    return float(np.max(np.abs(np.log(p) - np.log(q))))


def _cell_neighbours(grid: CellGrid):
    rng = np.random.default_rng(0)
    x = rng.lognormal(np.log(1.5), 1.0, 40)
    yield "random", x, np.where(np.arange(40) == 3, 14.0, x)
    e = grid.edge(700)
    edge = np.full(21, e)
    below = np.where(np.arange(21) == 0, np.nextafter(e, -1), edge)
    yield "cell edge vs one ulp below", edge, below
    yield "last bits", x, np.where(np.arange(40) == 5, np.nextafter(x[5], 99), x)
    ties = np.repeat([0.0, 1.0, 2.0], 10)
    yield "ties", ties, np.where(np.arange(30) == 15, 0.0, ties)
    onb = np.concatenate((np.full(10, -5.0), np.full(10, 15.0)))
    yield "on-bounds", onb, np.where(np.arange(20) == 0, 15.0, onb)
    yield "n=1", np.array([-5.0]), np.array([15.0])


@pytest.mark.parametrize("eps", [0.1, 1.41, 20.0])
def test_cell_mechanism_density_ratio_never_exceeds_e_eps(eps):
    bounds = (-5.0, 15.0)
    grid = CellGrid.for_bounds(bounds, 0.5)
    for name, x, xp in _cell_neighbours(grid):
        xs, xps = np.sort(np.clip(x, *bounds)), np.sort(np.clip(xp, *bounds))
        for k in sorted({0, len(x) // 2, len(x)}):
            assert _max_log_ratio(xs, xps, k, eps, grid) <= eps * (1 + 1e-12) + 1e-12, name


def test_cell_ratio_check_has_power():
    """A mechanism that forgets the 1/2 in exp(ε s/2) is caught by the same check."""
    grid = CellGrid.for_bounds((-5.0, 15.0), 0.5)
    x = np.sort(np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 40))
    xp = np.sort(np.where(np.arange(40) == 3, 14.0, x))
    assert _max_log_ratio(x, xp, 30, 2.0, grid) > 1.0 * 1.1  # claimed ε = 1


def test_cell_sampler_matches_the_exact_cell_law(monkeypatch):
    """Chi-square of 1500 cell draws (window shrunk so the O(n) branch runs too)."""
    import dpfair.median._expmech as em

    monkeypatch.setattr(em, "_WINDOW_MARGIN_DIGITS", -2.0)
    bounds = (-5.0, 15.0)
    grid = CellGrid.for_bounds(bounds, 0.5)
    x = np.sort(np.clip(np.random.default_rng(4).normal(2.0, 1.0, 60), *bounds))
    k, eps = 30, 1.0
    law = cell_order_statistic_law(x, k, eps, grid)
    gen = np.random.default_rng(9)
    cells = np.array([sample_order_statistic_cell(x, k, eps, grid, gen) for _ in range(1500)])
    assert chisquare_pvalue(cells, law) > FAIL_PROB  # bins of expected count >= 20
    far = np.abs(np.searchsorted(grid.index(x), cells) - k) > 3
    assert far.mean() > 0.05  # the fallback branch was exercised


def test_counts_path_draws_the_same_cells():
    bounds = (-5.0, 15.0)
    grid = CellGrid.for_bounds(bounds, 0.05)
    values = np.linspace(-4.0, 14.0, 50)
    counts = np.random.default_rng(2).integers(0, 5, 50)
    x = np.repeat(values, counts)
    k = int(x.size // 2)
    for seed in range(20):
        a = sample_order_statistic_cell(SortedCounts(values, counts), k, 1.0, grid,
                                        np.random.default_rng(seed))
        b = sample_order_statistic_cell(x, k, 1.0, grid, np.random.default_rng(seed))
        assert a == b


@pytest.mark.slow
def test_issue_attack_many_draws_two_sample():
    """10^4 independent draws on D and on D': no separation (the laws are identical, so the
    exact two-sample test of the output multiset can only fail with probability FAIL_PROB)."""
    d, d_prime = _issue_pair()
    lows_a, lows_b = [], []
    gen_a, gen_b = np.random.default_rng(11), np.random.default_rng(12)
    for _ in range(10_000):
        lows_a.append(dpfair.median.confidence_interval(
            d, rho=RHO, bounds=BOUNDS01, method="expmech", rng=gen_a).low)
        lows_b.append(dpfair.median.confidence_interval(
            d_prime, rho=RHO, bounds=BOUNDS01, method="expmech", rng=gen_b).low)
    assert stats.ks_2samp(lows_a, lows_b).pvalue > FAIL_PROB


# ------------------------------------------------------------------ Gaussian noise on counts
def test_tree_release_is_an_exact_translate_of_lattice_noise():
    """Neighbouring leaf counts, same seed: released − exact is bit-identical, on 2^-k·Z."""
    from dpfair.mechanisms import NoisyBinaryTree, leaf_counts

    x = np.random.default_rng(0).uniform(0, 1, 999)
    x_prime = x.copy()
    x_prime[0] = 0.999
    for root in ("public", "noisy"):
        mech = NoisyBinaryTree.for_zcdp(depth=6, rho=0.3, root=root)
        a = mech.release(leaf_counts(x, (0, 1), 6), rng=3)
        b = mech.release(leaf_counts(x_prime, (0, 1), 6), rng=3)
        for la, lb, ca, cb in zip(a.levels, b.levels, _levels(x), _levels(x_prime), strict=True):
            za, zb = la - ca, lb - cb
            assert np.array_equal(za, zb)
            assert np.all(za * 2.0**11 == np.rint(za * 2.0**11))  # on the public lattice


def _levels(x):
    from dpfair.mechanisms import leaf_counts
    from dpfair.mechanisms.tree import node_counts

    return node_counts(leaf_counts(x, (0, 1), 6))


def test_binsearch_noisy_counts_are_count_plus_lattice_noise():
    x = np.random.default_rng(1).lognormal(np.log(1.5), 1.0, 1000)
    x_prime = x.copy()
    x_prime[0] = np.nextafter(x[0], 0)
    a = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), method="binsearch", rng=4)
    b = dpfair.median.confidence_interval(x_prime, rho=0.5, bounds=(-5, 15), method="binsearch",
                                          rng=4)
    assert a.diagnostics["queries_lower"] == b.diagnostics["queries_lower"]
    for _, noisy in a.diagnostics["queries_lower"]:
        frac = noisy - math.floor(noisy)
        assert frac * 2.0**40 == round(frac * 2.0**40)  # k = 40 for n = 1000


# ------------------------------------------------------------------ CDP-Fair threshold
def test_threshold_on_snapped_scores_ignores_last_bits():
    from dpfair.fairclass._threshold import private_fair_threshold, snap_scores, threshold_law

    rng = np.random.default_rng(5)
    z = np.clip(rng.normal(0.0, 0.3, 400), -1, 1)
    a = (rng.random(400) < 0.4).astype(np.int8)
    z_prime = z.copy()
    z_prime[7] = np.nextafter(z[7], 1.0)
    s, s_prime = snap_scores(z), snap_scores(z_prime)
    for seed in range(50):
        t = private_fair_threshold(s[a == 1], s[a == 0], 160.0, 240.0, 0.05, 1.0, 0.3, seed)
        u = private_fair_threshold(s_prime[a == 1], s_prime[a == 0], 160.0, 240.0, 0.05, 1.0,
                                   0.3, seed)
        assert t.tau == u.tau
    law = threshold_law(s[a == 1], s[a == 0], 160.0, 240.0, 0.05, 1.0, 0.3)
    edges = law.continuous.edges
    on_lattice = edges * 2**15 == np.rint(edges * 2**15)
    assert np.all(on_lattice | np.isin(edges, [-0.3, 0.0, 0.3]))


# ------------------------------------------------------------------ end to end: CDP-Fair / FDP
def test_cdp_fair_model_ignores_last_bits_of_one_training_record():
    """Same seed, one feature of one row moved by one ulp: the released model (η̃ on the
    grid, π̃, τ) is bit-identical — the rows enter through exact integer binning, scores
    through the public lattice, and all noise is added exactly on public lattices."""
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.fairclass.datasets import simulate

    data = simulate(3000, np.random.default_rng(0))
    X2 = data.X.copy()
    X2[17, 0] = np.nextafter(X2[17, 0], np.inf)
    fits = [
        CDPFairClassifier(epsilon=1.0, delta=1e-6, feature_bounds=data.feature_bounds,
                          random_state=3).fit(X, data.y, sensitive_features=data.A)
        for X in (data.X, X2)
    ]
    for fa, fb in zip(fits[0].folds_, fits[1].folds_, strict=True):
        assert np.array_equal(fa.eta, fb.eta) and np.array_equal(fa.pi, fb.pi)
    assert np.array_equal(fits[0].tau_, fits[1].tau_)


# ------------------------------------------------------------------ facility DPExpMed
def _facility_pair():
    x = np.concatenate((np.full(26, 0.001), np.full(74, 0.9)))
    x_prime = x.copy()
    x_prime[0] = 0.001 + 1e-12
    return x, x_prime


def test_facility_real_arithmetic_draws_separate_the_pair():
    """Power: draws of the real-arithmetic sampler on D are often impossible under D'."""
    from dpfair.facility._mechanism import _law_from_sorted, _sample_windowed

    x, x_prime = _facility_pair()
    law_prime = _law_from_sorted(np.sort(x_prime), 50, 0.0, 1.0, 0.0, 1.0)
    gen = np.random.default_rng(0)
    draws = [_sample_windowed(x.copy(), epsilon=1.0, domain=(0.0, 1.0), alpha=0.0, k=50,
                              size=1, rng=gen)[0] for _ in range(400)]
    impossible = sum(not _legacy_reachable(float(t), law_prime, 0.0) for t in draws)
    assert impossible > 50


def test_facility_released_locations_are_reachable_under_the_neighbour():
    """Released: lo + (c + u)θ_g from the public cell c and u only, and every cell has
    positive probability under D' (exact cell-averaged law), so every location drawn on D
    is a possible output on D' — for the unwidened and the default mechanism."""
    from dpfair.facility import DPExpMed
    from dpfair.facility._mechanism import _OutputGrid

    x, x_prime = _facility_pair()
    grid = _OutputGrid.for_domain(0.0, 1.0)
    for widening in (0.0, None):
        mech = DPExpMed(1.0, (0.0, 1.0), widening=widening)
        law_prime = mech.distribution(x_prime).law
        draws = mech.sample(x, rng=1, size=400)
        c = grid.index(draws)
        lo, hi = grid.edge(c), grid.edge(c + 1)
        assert np.all((lo <= draws) & (draws <= hi))
        # the released law's edges are public cell boundaries
        edges = law_prime.edges
        assert np.all((edges == grid.edge(grid.index(edges))) | (edges == 1.0))
        assert np.all(law_prime.logpdf(draws) > -np.inf)
        # and D, D' have ε-close densities at every draw (pure ε-DP of the averaged law)
        law = mech.distribution(x).law
        assert np.max(np.abs(law.logpdf(draws) - law_prime.logpdf(draws))) <= 1.0 + 1e-9


# ------------------------------------------------------------------ facility Laplace baseline
def _median_pair():
    """The lower median (50th of 100) is the record moved by 1e-12: 0.3 vs 0.3 + 1e-12."""
    x = np.concatenate((np.full(50, 0.3), np.full(50, 0.9)))
    x_prime = x.copy()
    x_prime[49] = 0.3 + 1e-12
    return x, x_prime


def _numpy_laplace_reachable(y: float, loc: float, scale: float) -> bool:
    """Can the legacy release fl(loc + Z) equal y? numpy's C sampler draws U = j·2^-53 and
    returns Z = scale·log(U + U) for U < 1/2, else −scale·log((2 − U) − U) (libm's log,
    binary64 at every step); search the few j near the inverse of y − loc."""
    v_star = math.exp(-abs(y - loc) / scale)  # |Z| = −scale·log(v)
    for j0, neg in ((v_star / 2.0 * 2.0**53, True), ((2.0 - v_star) / 2.0 * 2.0**53, False)):
        for j in range(int(j0) - 8, int(j0) + 9):
            if not 1 <= j < 2**53:
                continue
            u = j * 2.0**-53
            if neg and u < 0.5:
                z = scale * math.log(u + u)
            elif not neg and u >= 0.5:
                z = -(scale * math.log((2.0 - u) - u))
            else:
                continue
            if loc + z == y:
                return True
    return False


def test_facility_laplace_legacy_float_release_separates_the_pair():
    """Power (Mironov 2012): the continuous binary64 release T + Laplace(m/ε), clipped,
    produces interior outputs on D that are impossible under D' (median moved by 1e-12);
    the reachability oracle is exact for numpy's sampler (every draw is reachable under D)."""
    x, x_prime = _median_pair()
    t, t_prime = float(np.sort(x)[49]), float(np.sort(x_prime)[49])
    assert t != t_prime
    gen = np.random.default_rng(0)
    z = gen.laplace(0.0, 1.0, size=400)  # exactly the legacy ClippedLaplaceLaw.sample draw
    y = t + z
    interior = y[(y > 0.0) & (y < 1.0)]
    assert interior.size > 100
    assert all(_numpy_laplace_reachable(float(v), t, 1.0) for v in interior)
    impossible = sum(not _numpy_laplace_reachable(float(v), t_prime, 1.0) for v in interior)
    assert impossible > interior.size // 4


def test_facility_laplace_release_is_identical_on_the_pair():
    """Executed: the median enters only through the integer grid index K; on the pair K is
    equal, so the laws are identical and common seeds give bit-identical outputs, all on
    the public grid lo + j·m/N."""
    from dpfair.facility import LaplaceMedian

    x, x_prime = _median_pair()
    for eps in (0.1, 1.0, 20.0):
        mech = LaplaceMedian(eps, (0.0, 1.0))
        p, q = mech.distribution(x).law, mech.distribution(x_prime).law
        assert (p.center, p.scale, p.steps) == (q.center, q.scale, q.steps)
        a = mech.sample(x, rng=5, size=400)
        b = mech.sample(x_prime, rng=5, size=400)
        assert np.array_equal(a, b)
        j = np.rint(a * mech.steps).astype(np.int64)
        assert np.array_equal(p.location(j), a)  # grid points, bit for bit
        assert np.all(np.isfinite(q.logpmf(a)))  # every output on D is possible on D'


def test_facility_laplace_index_change_has_exact_ratio_and_full_support():
    """Last bits that *do* move K (a median on a rounding boundary vs one ulp below): the
    executed pmfs have full support on the grid and ratio ≤ e^ε everywhere (exact)."""
    from dpfair.facility import LaplaceMedian

    mech = LaplaceMedian(1.0, (0.0, 1.0), grid_bits=10)
    t = 300.5 / 2**10  # halfway between grid points: rint rounds to even (300)
    x = np.full(9, t)
    x_prime = np.where(np.arange(9) < 5, np.nextafter(t, 1.0), t)  # median one ulp up: 301
    p, q = mech.distribution(x).law, mech.distribution(x_prime).law
    assert q.center - p.center == 1
    j = np.arange(mech.steps + 1)
    lp, lq = p.logpmf_index(j), q.logpmf_index(j)
    assert np.all(np.isfinite(lp)) and np.all(np.isfinite(lq))
    assert np.max(np.abs(lp - lq)) <= 1.0 / mech.noise_scale + 1e-12  # |ΔK| = 1: e^{1/t}


def test_facility_laplace_sampler_matches_the_exact_law():
    """Chi-square of 20,000 executed draws against the exact clipped discrete-Laplace law
    (atoms at both ends + 10 interior bins); false-alarm probability FAIL_PROB."""
    from dpfair.facility import LaplaceMedian

    x = np.random.default_rng(8).uniform(0.2, 0.5, 31)
    mech = LaplaceMedian(2.0, (0.0, 1.0))
    law = mech.distribution(x).law
    draws = mech.sample(x, rng=13, size=20_000)
    inner = np.linspace(0.0, 1.0, 11)[1:-1]
    edges = np.concatenate(([0.0], inner))
    cdf = np.concatenate(([law.atom_lo], law.cdf(inner), [1.0 - law.atom_hi], [1.0]))
    expected = np.diff(np.concatenate(([0.0], cdf))) * draws.size
    observed = np.array([np.sum(draws == 0.0)]
                        + [np.sum((draws > a) & (draws <= b)) for a, b in
                           zip(edges, np.append(inner, np.nextafter(1.0, 0.0)), strict=True)]
                        + [np.sum(draws == 1.0)])
    observed[-2] = np.sum((draws > inner[-1]) & (draws < 1.0))
    assert observed.sum() == draws.size
    assert stats.chisquare(observed, expected * draws.size / expected.sum()).pvalue > FAIL_PROB


def test_facility_laplace_two_sample_on_the_pair():
    """Independent draws on D and D': the executed laws are identical, so the exact
    two-sample test can fail only with probability ≤ FAIL_PROB. (A distributional test
    cannot see a 1e-12 shift; the legacy release is caught by the reachability test.)"""
    from dpfair.facility import LaplaceMedian

    x, x_prime = _median_pair()
    mech = LaplaceMedian(1.0, (0.0, 1.0))
    a = mech.sample(x, rng=21, size=3000)
    b = mech.sample(x_prime, rng=22, size=3000)
    assert stats.ks_2samp(a, b).pvalue > FAIL_PROB


# ------------------------------------------------------------------ facility grid EM baseline
def test_facility_grid_em_ignores_last_bits_that_keep_the_counts():
    """One record moved by 1e-12 / one ulp without crossing a public candidate: the integer
    scores, hence the computed law and the output under a common seed, are bit-identical."""
    from dpfair.facility import GridExpMed

    base = np.concatenate((np.full(26, 0.0015), np.full(74, 0.9003)))
    for moved in (0.0015 + 1e-12, np.nextafter(0.0015, 1.0), np.nextafter(0.0015, 0.0)):
        x_prime = base.copy()
        x_prime[0] = moved
        for score in ("rank", "percentile"):
            mech = GridExpMed(1.0, (0.0, 1.0), grid_size=1001, score=score)
            p, q = mech.distribution(base).law, mech.distribution(x_prime).law
            assert np.array_equal(p.log_prob, q.log_prob) and np.array_equal(p.cum, q.cum)
            a = mech.sample(base, rng=3, size=200)
            b = mech.sample(x_prime, rng=3, size=200)
            assert np.array_equal(a, b)
            assert set(a.tolist()) <= set(mech.candidates.tolist())


def test_facility_grid_em_count_change_is_covered_by_the_ratio_bound():
    """A record on a candidate moved one ulp across it changes one count: the computed
    log-probabilities then differ (the equality check above has power) but by ≤ ε,
    with full support, so the argued (ε, δ_fp) statement applies."""
    from dpfair.facility import GridExpMed

    mech0 = GridExpMed(1.0, (0.0, 1.0), grid_size=1001)
    c = float(mech0.candidates[300])
    base = np.concatenate((np.full(50, c), np.full(50, 0.9003)))
    x_prime = base.copy()
    x_prime[0] = np.nextafter(c, 1.0)
    for eps in (0.1, 1.0, 20.0):
        for score in ("rank", "percentile"):
            mech = GridExpMed(eps, (0.0, 1.0), grid_size=1001, score=score)
            p, q = mech.distribution(base).law, mech.distribution(x_prime).law
            assert not np.array_equal(p.log_prob, q.log_prob)
            assert np.all(np.isfinite(p.log_prob)) and np.all(np.isfinite(q.log_prob))
            assert np.max(np.abs(p.log_prob - q.log_prob)) <= eps * (1 + 1e-12) + 1e-12
    assert mech0.privacy.kind == "pure" and mech0.privacy.epsilon == 1.0  # exact choice


# ------------------------------------------------------------------ CDP-Fair certificate check
def _check_pair():
    """Calibration curves of neighbours (one group-1 record's score moved past τ):
    DD̂ = c₁/m̃₁ − c₀/m̃₀ with c₁ = 120 vs 121, released m̃₁ = 400.37, m̃₀ = 599.81."""
    from dpfair.fairclass._threshold import DDSteps

    m1, m0 = 400.37, 599.81
    steps = [DDSteps(np.array([0.0]), np.array([c1 / m1 - 200 / m0] * 2), np.array([0.5]))
             for c1 in (120, 121)]
    return steps, m1, m0


def test_certificate_check_legacy_float_release_separates_neighbours():
    """Power (Mironov 2012 on a ratio of counts): the unsnapped fl(DD̂ + Laplace) outputs on D
    are often impossible under the neighbour's DD̂ (exact oracle for numpy's sampler)."""
    (s, s_prime), m1, m0 = _check_pair()
    v, v_prime = s.at(0.3), s_prime.at(0.3)
    b = (1 / m1 + 1 / m0) / 1.0
    z = np.random.default_rng(0).laplace(0.0, b, size=300)  # the legacy draw
    y = v + z
    assert all(_numpy_laplace_reachable(float(t), v, b) for t in y)
    impossible = sum(not _numpy_laplace_reachable(float(t), v_prime, b) for t in y)
    assert impossible > 20  # 46 of 300 with this seed: P_D(S) ≈ 0.15, P_D'(S) = 0


def test_certificate_check_is_an_exact_translate_of_lattice_noise():
    """Executed: released − snap(DD̂) is bit-identical across the neighbours under a common
    seed and lies on the public lattice, so the reachable outputs are lattice translates
    (the legacy separation above cannot occur)."""
    from dpfair.fairclass._certify import check_lattice, check_threshold
    from dpfair.mechanisms.lattice import snap_to_lattice

    (s, s_prime), m1, m0 = _check_pair()
    k, _ = check_lattice(m1, m0, 1.0)
    for seed in range(200):
        out = [check_threshold(st, 0.3, m1, m0, 0.1, margin=0.01, target=0.05,
                               epsilon_check=1.0, fail_prob=0.05,
                               rng=np.random.default_rng(seed)).released_dd
               for st in (s, s_prime)]
        za = out[0] - float(snap_to_lattice(s.at(0.3), k))
        zb = out[1] - float(snap_to_lattice(s_prime.at(0.3), k))
        assert za == zb
        assert za * 2.0**k == round(za * 2.0**k)
        assert out[0] * 2.0**k == round(out[0] * 2.0**k)

"""Floating-point attacks on the exponential-mechanism releases with the exact piece choice.

The piece (cell, lattice run, candidate) is now chosen by the exact sampler
(``dpfair.mechanisms.exact_choice``); these tests check, as an adversary would, that the
released outputs depend on the data only through the integer profile (M_j, d_j) — data
sets with equal profiles give bit-identical outputs under a common seed, also when the
slow (exact decimal) path decides every draw — and that the issue's attack stays closed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpfair
import dpfair.mechanisms.exact_choice as ec
from dpfair.median._expmech import CellGrid, cell_order_statistic_law, sample_order_statistic_cell
from tests._stats import FAIL_PROB, chisquare_pvalue

BOUNDS01 = (0.0, 1.0)
RHO = 0.5


def _issue_pair() -> tuple[np.ndarray, np.ndarray]:
    d = np.concatenate((np.full(26, 0.001), np.full(74, 0.9)))
    d_prime = d.copy()
    d_prime[0] = 0.001 + 1e-12
    return np.sort(d), np.sort(d_prime)


def _ci(x, seed, **kw):
    r = dpfair.median.confidence_interval(x, rho=RHO, bounds=BOUNDS01, method="expmech",
                                          rng=seed, **kw)
    return r.low, r.high


def test_issue_attack_outputs_are_bit_identical():
    """The issue's pair (26 × 0.001, 74 × 0.9; one 0.001 → 0.001 + 1e-12), n = 100,
    ρ = 0.5, bounds (0, 1): 400 common seeds give bit-identical intervals."""
    d, d_prime = _issue_pair()
    outs = [_ci(d, s) for s in range(400)]
    assert outs == [_ci(d_prime, s) for s in range(400)]
    assert len(set(outs)) > 20  # the release is random: equality has power


def test_issue_attack_bit_identical_when_the_slow_path_decides(monkeypatch):
    """Same with the fast path disabled (test hook): the exact decimal path sees only the
    integer cell profile too."""
    monkeypatch.setattr(ec, "_FAST_PATH_SLACK", 0.5)
    d, d_prime = _issue_pair()
    assert [_ci(d, s) for s in range(30)] == [_ci(d_prime, s) for s in range(30)]


def test_equal_cell_profiles_give_identical_intervals():
    """Two different data sets whose records fall in the same public cells (θ_g = θ/64):
    identical outputs for every seed."""
    grid = CellGrid.for_bounds((-5.0, 15.0), 0.05)
    rng = np.random.default_rng(1)
    cells = np.sort(rng.integers(0, grid.n_cells, 300))
    x = grid.low + (cells + 0.25) * grid.cell
    y = grid.low + (cells + 0.75) * grid.cell  # same cells, different values
    assert np.array_equal(grid.index(x), grid.index(y))
    for seed in range(100):
        a = dpfair.median.confidence_interval(x, rho=0.3, bounds=(-5.0, 15.0),
                                              method="expmech", granularity=0.05, rng=seed)
        b = dpfair.median.confidence_interval(y, rho=0.3, bounds=(-5.0, 15.0),
                                              method="expmech", granularity=0.05, rng=seed)
        assert (a.low, a.high) == (b.low, b.high)


@pytest.mark.parametrize("margin", [-2.0, -8.0])
def test_cell_sampler_law_with_a_dominating_outside_bound(monkeypatch, margin):
    """Window shrunk so the virtual outside piece (|R|·e^{−c(T+1)}) often dominates: the
    O(n) branch and its exact accept/reject run often; chi-square against the exact law."""
    import dpfair.median._expmech as em

    monkeypatch.setattr(em, "_WINDOW_MARGIN_DIGITS", margin)
    outcomes = []
    original = ec.choose_pieces

    def spy(masses, units, rate, rng, size=None, *, total=None):
        j = original(masses, units, rate, rng, size, total=total)
        if total is not None:  # True: rejected, redrawn from the full law
            outcomes.extend((j == len(masses)).tolist())
        return j

    monkeypatch.setattr(ec, "choose_pieces", spy)
    bounds = (-5.0, 15.0)
    grid = CellGrid.for_bounds(bounds, 0.5)
    x = np.sort(np.clip(np.random.default_rng(4).normal(2.0, 1.0, 60), *bounds))
    k, eps = 30, 1.0
    law = cell_order_statistic_law(x, k, eps, grid)
    gen = np.random.default_rng(19)
    cells = np.array([sample_order_statistic_cell(x, k, eps, grid, gen) for _ in range(1500)])
    assert chisquare_pvalue(cells, law) > FAIL_PROB
    assert sum(outcomes) > 20 and len(outcomes) - sum(outcomes) >= 5  # both branches ran


def test_grid_em_equal_counts_identical_outputs_and_pure_privacy():
    """GridExpMed: data sets with the same counts against the public candidates give
    bit-identical outputs (fast and slow path); the guarantee is pure ε (no δ_fp)."""
    from dpfair.facility import GridExpMed
    from dpfair.privacy import Accountant, Budget

    mech = GridExpMed(1.0, BOUNDS01, grid_size=1001)
    base = np.concatenate((np.full(26, 0.0015), np.full(74, 0.9003)))
    other = np.concatenate((np.full(26, 0.0017), np.full(74, 0.9004)))  # same counts
    assert mech.privacy.kind == "pure" and mech.privacy.epsilon == 1.0
    acct = Accountant(Budget.pure(2.0))  # a pure-DP accountant now accepts it
    for score in ("rank", "percentile"):
        m = GridExpMed(1.0, BOUNDS01, grid_size=1001, score=score)
        a = m.sample(base, rng=3, size=300)
        assert np.array_equal(a, m.sample(other, rng=3, size=300))
        assert set(a.tolist()) <= set(m.candidates.tolist())
    mech.sample(base, rng=1, accountant=acct)
    assert acct.spent.epsilon == pytest.approx(1.0)


def test_grid_em_slow_path_identical(monkeypatch):
    from dpfair.facility import GridExpMed

    monkeypatch.setattr(ec, "_FAST_PATH_SLACK", 0.5)
    m = GridExpMed(1.0, BOUNDS01, grid_size=51)
    base = np.concatenate((np.full(26, 0.0015), np.full(74, 0.9003)))
    other = np.concatenate((np.full(26, 0.0017), np.full(74, 0.9004)))
    assert np.array_equal(m.sample(base, rng=5, size=40), m.sample(other, rng=5, size=40))


def test_grid_em_sampler_matches_its_law():
    """Chi-square of 20000 draws against the exact law (its candidates binned)."""
    from dpfair.facility import GridExpMed

    m = GridExpMed(2.0, BOUNDS01, grid_size=101)
    x = np.random.default_rng(6).uniform(0.3, 0.7, 40)
    law = m.distribution(x).law
    draws = m.sample(x, rng=7, size=20_000)
    idx = np.searchsorted(law.support, draws)
    probs = law.probabilities
    keep = probs * draws.size >= 5
    observed = np.bincount(idx, minlength=probs.size)
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * draws.size
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > FAIL_PROB


def test_threshold_equal_lattice_profiles_identical(monkeypatch):
    """CDP-Fair threshold: two calibration sets with the same lattice histogram per group
    (different record order and sub-lattice bits) give the same τ̂; also on the slow path."""
    from dpfair.fairclass._threshold import private_fair_threshold, snap_scores

    rng = np.random.default_rng(5)
    a = (rng.random(400) < 0.4).astype(np.int8)
    s = snap_scores(np.clip(rng.normal(0.0, 0.3, 400), -1, 1))
    perm = rng.permutation(400)
    step = 2.0 / 2**16  # the public score lattice
    z2 = np.clip(s[perm] + rng.uniform(-0.4, 0.4, 400) * step, -1, 1)  # other raw scores
    s2, a2 = snap_scores(z2), a[perm]
    assert np.array_equal(s2, s[perm]) and not np.array_equal(z2, s[perm])
    aa = a
    for slack in (0.0, 0.5):
        monkeypatch.setattr(ec, "_FAST_PATH_SLACK", slack)
        for seed in range(20 if slack else 60):
            t = private_fair_threshold(s[aa == 1], s[aa == 0], 160.0, 240.0, 0.05, 1.0, 0.3,
                                       seed)
            u = private_fair_threshold(s2[a2 == 1], s2[a2 == 0], 160.0, 240.0, 0.05, 1.0, 0.3,
                                       seed)
            assert t.tau == u.tau


def test_threshold_quantised_loss_is_epsilon_dp_exactly():
    """The executed law (quantised loss, exact rate) has every density and atom ratio
    ≤ e^ε between neighbours; the integer losses move by at most S units."""
    from dpfair.fairclass._threshold import loss_lattice, threshold_law

    eps, m1, m0, r, alpha = 0.7, 31.3, 48.2, 0.3, 0.05
    rng = np.random.default_rng(2)
    z1, z0 = rng.uniform(-0.3, 0.3, 30), rng.uniform(-0.6, 0.6, 50)
    z1b = z1.copy()
    z1b[0] = -0.25
    la = threshold_law(z1, z0, m1, m0, alpha, eps, r)
    lb = threshold_law(z1b, z0, m1, m0, alpha, eps, r)
    _, s_units = loss_lattice(m1, m0, alpha, 80)
    assert la.rate * 2 * s_units <= eps
    edges = np.unique(np.concatenate([la.continuous.edges, lb.continuous.edges]))
    mids = 0.5 * (edges[:-1] + edges[1:])
    ratio = np.log(la.density(mids)) - np.log(lb.density(mids))
    assert np.max(np.abs(ratio)) <= eps * (1 + 1e-12)
    assert abs(math.log(la.p_atom) - math.log(lb.p_atom)) <= eps * (1 + 1e-12)
    ia = np.clip(np.searchsorted(la.continuous.edges, mids, side="right") - 1, 0, None)
    ib = np.clip(np.searchsorted(lb.continuous.edges, mids, side="right") - 1, 0, None)
    assert np.max(np.abs(la.units[ia] - lb.units[ib])) <= s_units
    assert abs(int(la.units[-1]) - int(lb.units[-1])) <= s_units


@pytest.mark.parametrize("slack", [0.0, 0.5])
def test_threshold_sampler_matches_its_law_on_both_paths(monkeypatch, slack):
    """Exact binomial bounds (FAIL_PROB each) on P(τ̂ = 0) and P(τ̂ ≤ t), fast path and
    slow path (test hook), against the executed law ``threshold_law``."""
    from dpfair.fairclass._threshold import threshold_law

    monkeypatch.setattr(ec, "_FAST_PATH_SLACK", slack)
    rng = np.random.default_rng(12)
    z1, z0 = rng.uniform(-0.3, 0.3, 60), rng.uniform(-0.6, 0.6, 90)
    law = threshold_law(z1, z0, 60.0, 90.0, 0.1, 1.0, 0.3, atom_mass=0.05)
    gen = np.random.default_rng(3)
    n = 1500 if slack else 20_000
    draws = np.array([law.sample(gen) for _ in range(n)])
    checks = [(draws == 0.0, law.p_atom)]
    for t in (-0.2, -0.1, 0.0, 0.05):
        checks.append((draws <= t, float(law.p_atom * (t >= 0)
                                         + (1 - law.p_atom) * law.continuous.cdf(t))))
    for hits, p in checks:
        k = int(hits.sum())
        assert stats.binom.ppf(FAIL_PROB / 2, n, p) <= k <= stats.binom.isf(FAIL_PROB / 2, n, p)

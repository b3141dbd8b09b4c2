"""S2: the exact fair threshold, the private threshold's exact law and its DP ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfair.fairclass._threshold import (
    AIM_WINDOW,
    dd_steps,
    exact_fair_threshold,
    loss_lattice,
    paper_vertical_shift_threshold,
    private_fair_threshold,
    snap_scores,
    threshold_law,
)
from tests._stats import FAIL_PROB, min_successes


def _dd_brute(z1, z0, tau, m1=None, m0=None):
    m1 = len(z1) if m1 is None else m1
    m0 = len(z0) if m0 is None else m0
    return np.sum(np.asarray(z1) >= tau) / m1 - np.sum(np.asarray(z0) <= tau) / m0


def test_dd_steps_match_brute_force_everywhere():
    rng = np.random.default_rng(0)
    z1 = np.round(rng.uniform(-0.3, 0.3, 40), 2)  # ties on purpose
    z0 = np.round(rng.uniform(-0.7, 0.7, 70), 2)
    steps = dd_steps(z1, z0)
    probes = np.concatenate([steps.breaks, steps.breaks + 1e-9, steps.breaks - 1e-9, [-5, 5]])
    for t in probes:
        assert steps.at(float(t)) == pytest.approx(_dd_brute(z1, z0, t), abs=1e-15)
    # non-increasing along the cells
    cells = np.empty(2 * steps.breaks.size + 1)
    cells[0::2], cells[1::2] = steps.gap, steps.atom
    assert np.all(np.diff(cells) <= 1e-15)


@pytest.mark.parametrize("alpha", [0.02, 0.1, 0.3])
def test_exact_threshold_is_the_argmin(alpha):
    """Compare with a brute-force search over every cell (atoms and gap interiors)."""
    rng = np.random.default_rng(1)
    for _ in range(30):
        z1 = rng.uniform(-0.3, 0.3, rng.integers(5, 40))
        z0 = rng.uniform(-0.7, 0.2, rng.integers(5, 60))
        res = exact_fair_threshold(dd_steps(z1, z0), alpha)
        b = np.unique(np.concatenate([z1, z0]))
        cands = np.concatenate([b, np.nextafter(b, np.inf), np.nextafter(b, -np.inf), [0.0]])
        feas = [t for t in cands if abs(_dd_brute(z1, z0, t)) <= alpha]
        assert res.feasible == bool(feas)
        if feas:
            best = min(abs(t) for t in feas)
            assert abs(res.tau) == pytest.approx(best, abs=1e-15)
            assert abs(_dd_brute(z1, z0, res.tau)) <= alpha


def test_exact_threshold_zero_when_already_fair():
    z1 = np.array([-0.1, 0.05, 0.2])
    z0 = np.array([-0.2, 0.1, 0.3])
    # DD(0) = 2/3 - 1/3 = 1/3
    assert exact_fair_threshold(dd_steps(z1, z0), 0.4).tau == 0.0


def test_exact_threshold_infeasible_jump_reports_closest_cell():
    # Tied scores: DD takes the values 1, 0.5 (at 0.2), -0.5, -1 and never enters [-0.1, 0.1].
    z1 = np.full(10, 0.2)
    z0 = np.array([0.2] * 5 + [0.25] * 5)
    res = exact_fair_threshold(dd_steps(z1, z0), 0.1)
    assert res.feasible is False
    assert res.tau == 0.2 and res.dd == pytest.approx(0.5)


def _law_pair(seed=0, n1=30, n0=50, change="move"):
    rng = np.random.default_rng(seed)
    z1 = rng.uniform(-0.3, 0.3, n1)
    z0 = rng.uniform(-0.6, 0.3, n0)
    if change == "move":  # same group, new score
        z1b, z0b = z1.copy(), z0.copy()
        z1b[0] = rng.uniform(-0.3, 0.3)
    else:  # group change: record leaves group 1 and joins group 0 with a new score
        z1b = z1[1:].copy()
        z0b = np.concatenate([z0, [rng.uniform(-0.6, 0.3)]])
    return (z1, z0), (z1b, z0b)


@pytest.mark.parametrize("with_base", [False, True])
@pytest.mark.parametrize("change", ["move", "group"])
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_private_threshold_is_epsilon_dp_exactly(change, alpha, with_base):
    """Density ratio on every piece of both laws and the atom ratio are ≤ e^ε.

    The denominators m1, m0 are public (released separately), so they are the same for
    both neighbours. The check is exact: both laws are piecewise constant, evaluated on
    the common refinement of their pieces.
    """
    eps, m1, m0, r = 0.7, 31.3, 48.2, 0.3
    base = (np.linspace(-0.4, 0.4, 9), np.arange(1.0, 9.0)) if with_base else None
    for seed in range(10):
        (a1, a0), (b1, b0) = _law_pair(seed, change=change)
        la = threshold_law(a1, a0, m1, m0, alpha, eps, r, base=base)
        lb = threshold_law(b1, b0, m1, m0, alpha, eps, r, base=base)
        edges = np.unique(np.concatenate([la.continuous.edges, lb.continuous.edges]))
        mids = 0.5 * (edges[:-1] + edges[1:])
        ratio = np.log(la.density(mids)) - np.log(lb.density(mids))
        assert np.max(np.abs(ratio)) <= eps + 1e-9
        assert abs(math.log(la.p_atom) - math.log(lb.p_atom)) <= eps + 1e-9


def test_private_threshold_sampler_matches_its_law(seed):
    """Exact binomial bounds (1e-6) on P(τ̂ = 0) and P(τ̂ ≤ t) over 20000 draws."""
    rng = np.random.default_rng(12)
    z1 = rng.uniform(-0.3, 0.3, 200)
    z0 = rng.uniform(-0.6, 0.6, 400)
    law = threshold_law(z1, z0, 200.0, 400.0, 0.1, 1.0, 0.3, atom_mass=0.05)
    gen = np.random.default_rng(seed)
    draws = np.array([law.sample(gen) for _ in range(20000)])
    checks = [(draws == 0.0, law.p_atom)]
    for t in (-0.2, -0.1, 0.0, 0.05):
        p = float(law.p_atom * (t >= 0) + (1 - law.p_atom) * law.continuous.cdf(t))
        checks.append((draws <= t, p))
    for hits, p in checks:
        k = int(hits.sum())
        lo = stats.binom.ppf(FAIL_PROB / 2, draws.size, p)
        hi = stats.binom.isf(FAIL_PROB / 2, draws.size, p)
        assert lo <= k <= hi


def test_private_threshold_concentrates_on_target():
    """With a large ε the draw lands where the calibration DD̂ is within 2Δ/ε·10 of α."""
    rng = np.random.default_rng(3)
    z1 = rng.uniform(-0.3, 0.3, 3000)
    z0 = rng.uniform(-0.7, 0.1, 7000)  # group 0 favoured: DD(0) < -alpha
    steps = dd_steps(z1, z0)
    for s in range(20):
        res = private_fair_threshold(z1, z0, 3000.0, 7000.0, 0.1, 5.0, 0.3, rng=s)
        assert res.tau < 0
        assert abs(steps.at(res.tau) + 0.1) <= 10 * 2 * (1 / 3000 + 1 / 7000) / 5.0 + 1e-3


def test_private_threshold_returns_zero_when_fair():
    rng = np.random.default_rng(4)
    z1 = rng.uniform(-0.3, 0.3, 2000)
    z0 = rng.uniform(-0.3, 0.3, 2000)  # DD(0) ≈ 0
    zeros = sum(
        private_fair_threshold(z1, z0, 2000.0, 2000.0, 0.2, 1.0, 0.3, rng=s).tau == 0.0
        for s in range(50)
    )
    assert zeros >= min_successes(50, 0.999)


def test_paper_vertical_shift_releases_a_calibration_score():
    """Why Algorithm 5's S2 is not DP as stated: its output is one record's own score.

    Over 2000 draws the rule returns exactly (or one float step from) a calibration score
    whenever τ̂ ≠ 0, and the single most frequent score is returned with probability well
    above any meaningful δ. Replacing that record removes the atom (probability 0 under the
    neighbour), so (ε, δ)-DP would need δ at least that large.
    """
    rng = np.random.default_rng(5)
    z1 = rng.uniform(-0.3, 0.3, 300)
    z0 = rng.uniform(-0.7, 0.1, 700)
    gen = np.random.default_rng(6)
    sigma = 2 * math.sqrt(2 * math.log(1.25 / 1e-6)) / 1000  # the published code's noise
    taus = np.array(
        [paper_vertical_shift_threshold(z1, z0, 0.1, sigma, gen).tau for _ in range(2000)]
    )
    scores = np.concatenate([z1, z0])
    snapped = [
        t == 0.0 or np.any(scores == t) or np.any(np.nextafter(scores, np.sign(t) * np.inf) == t)
        for t in taus
    ]
    assert all(snapped)
    _, counts = np.unique(taus, return_counts=True)
    assert counts.max() / taus.size > 0.01


# ---------------------------------------------------------------------------- windowed loss
@pytest.mark.parametrize("change", ["move", "group"])
@pytest.mark.parametrize("alpha", [0.02, 0.2])
def test_windowed_threshold_is_epsilon_dp_exactly(change, alpha):
    """The certified rule's windowed loss keeps the exact e^ε ratio on every piece (issue 20)."""
    eps, m1, m0, r = 0.7, 31.3, 48.2, 0.3
    for seed in range(10):
        (a1, a0), (b1, b0) = _law_pair(seed, change=change)
        la = threshold_law(a1, a0, m1, m0, alpha, eps, r, window=AIM_WINDOW * 64)
        lb = threshold_law(b1, b0, m1, m0, alpha, eps, r, window=AIM_WINDOW * 64)
        edges = np.unique(np.concatenate([la.continuous.edges, lb.continuous.edges]))
        mids = 0.5 * (edges[:-1] + edges[1:])
        ratio = np.log(la.density(mids)) - np.log(lb.density(mids))
        assert np.max(np.abs(ratio)) <= eps + 1e-9
        assert abs(math.log(la.p_atom) - math.log(lb.p_atom)) <= eps + 1e-9


def test_windowed_loss_matches_brute_force():
    """L_h(τ) = max(DD̂(τ) − a, a − DD̂(τ − h), 0) for τ > 0 (mirror for τ < 0), piece by piece."""
    rng = np.random.default_rng(3)
    z1 = np.round(rng.uniform(-0.3, 0.3, 40), 2)  # ties: a discrete curve
    z0 = np.round(rng.uniform(-0.6, 0.6, 60), 2)
    h, a = 2.0**-6, 0.05
    law = threshold_law(z1, z0, 40.0, 60.0, a, 1.0, 0.3, window=h)
    edges = law.continuous.edges
    mids = 0.5 * (edges[:-1] + edges[1:])
    zs1, zs0 = snap_scores(z1), snap_scores(z0)
    for m, u in zip(mids, law.units[:-1], strict=True):
        dd = _dd_brute(zs1, zs0, m, 40.0, 60.0)
        if m > 0:
            want = max(dd - a, a - _dd_brute(zs1, zs0, m - h, 40.0, 60.0), 0.0)
        else:
            want = max(-a - dd, _dd_brute(zs1, zs0, m + h, 40.0, 60.0) + a, 0.0)
        unit, _ = loss_lattice(40.0, 60.0, a, 100)
        assert u == math.ceil(want / unit - 1e-9) or abs(u * unit - want) <= 2 * unit


def test_window_prefers_the_feasible_side_of_a_jump():
    """A tied curve whose one step straddles the aim: without the window the mechanism
    prefers the nearer (violating) side; with it, at large ε, the feasible side (issue 20)."""
    z1 = np.concatenate([np.full(50, 0.1), np.linspace(0.26, 0.29, 50)])  # half tied at 0.1
    z0 = np.linspace(0.32, 0.6, 100)
    # On (0, 0.1]: DD̂ = 1.0; on (0.1, 0.26): 0.5. The aim 0.8 is 0.2 below the left side
    # (violating) and 0.3 above the right side (feasible).
    aim = 0.8
    hits = {}
    for window in (0.0, AIM_WINDOW):
        law = threshold_law(z1, z0, 100.0, 100.0, aim, 50.0, 0.3, window=window)
        edges = law.continuous.edges
        mids = 0.5 * (edges[:-1] + edges[1:])
        mass = (1 - law.p_atom) * law.continuous.pdf(mids) * np.diff(edges)
        dd = np.array([law.steps.at(float(m)) for m in mids])
        hits[window] = float(mass[dd <= aim].sum())
    assert hits[0.0] < 0.01
    assert hits[AIM_WINDOW] > 0.99

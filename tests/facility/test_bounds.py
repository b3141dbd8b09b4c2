"""Explicit bounds of paper 000 checked against exactly computed probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.facility import (
    DPExpMed,
    GridExpMed,
    LaplaceMedian,
    ctm_worst_case,
    fair_lower_bound_pair,
    impossibility_pair,
    is_ctm,
    ks_distance,
    spm_worst_case,
    truncated_normal_law,
    unwidened_expmed,
)
from dpfair.facility.bounds import (
    ctm_bounds,
    ctm_kstar,
    ctm_min_k,
    ctm_tail_bound,
    direct_lower_bound,
    impossibility_bound,
    spm_fair_bound,
    spm_tail_bound,
    table1,
)
from tests.facility._helpers import DOMAIN, random_ctm

REL = 1e-9


def _cell_slack(d) -> float:
    """How much P(p_α(D, L) > k) at the *released* L can exceed it at the draw ℓ.

    L is a uniform point of ℓ's public cell (θ_g = 2^-44 here), so p_α(D, L) > k ≥ p_α(D, ℓ)
    needs ℓ in one of the two cells that straddle the ends of the interval {p_α ≤ k}; each
    cell's mass is the same under both laws and ≤ θ_g · (the released law's max density).
    The paper's bounds are for ℓ; ``loss_sf`` is the law at L (docs/floating_point.md).
    """
    from dpfair.facility._mechanism import _OutputGrid

    cell = _OutputGrid.for_domain(*DOMAIN).cell
    return 2.0 * cell * float(np.exp(np.max(d.law.log_density_levels)))


@pytest.mark.parametrize("n", [11, 12, 101])
@pytest.mark.parametrize("eps", [0.2, 1.0, 3.0])
def test_thm_7_9_tail_bound_holds_on_the_worst_cases(n, eps):
    """Exact P(p_α > k) on D_k^CTM ≤ inequality (5) ≤ the simplified bound."""
    mech = DPExpMed(eps, DOMAIN)
    k_med = (n + 1) // 2
    for k in range(k_med - 1):
        d = mech.distribution(ctm_worst_case(n, k, DOMAIN), presorted=True)
        exact = d.loss_sf(k)
        b5 = float(ctm_tail_bound(k, n, eps, form="sum"))
        bs = float(ctm_tail_bound(k, n, eps))
        assert exact <= b5 * (1 + REL) + 1e-15 + _cell_slack(d)
        assert b5 <= bs * (1 + REL) + 1e-15


def test_lemma_7_8_worst_case_on_random_ctm_data():
    """Lemma 7.8: every CTM data set has P(p_α ≤ k) ≥ that of D_k^CTM (checked exactly)."""
    rng = np.random.default_rng(8)
    for _ in range(120):
        n = int(rng.integers(3, 30))
        x = random_ctm(rng, n)
        assert is_ctm(x)
        eps = float(rng.uniform(0.1, 3))
        alpha = float(rng.choice([0.0, rng.uniform(0, 0.2), 1 / (n * eps)]))
        mech = DPExpMed(eps, DOMAIN, widening=alpha)
        d = mech.distribution(x)
        for k in range((n + 1) // 2 - 1):
            worst = mech.distribution(ctm_worst_case(n, k, DOMAIN)).loss_sf(k)
            assert d.loss_sf(k) <= worst * (1 + REL) + 1e-14


@pytest.mark.parametrize("n", [101, 1001])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_kstar_and_fair_bound_cover_measured_quantiles(n, eps):
    beta = 0.05
    b = ctm_bounds(n, 1.0, eps, beta)
    assert b.kstar_satisfies_6 == (b.kstar < n // 2 and ctm_tail_bound(b.kstar, n, eps) <= beta)
    assert b.min_k <= b.kstar or not b.kstar_satisfies_6
    mech = DPExpMed(eps, DOMAIN)
    d = mech.distribution(ctm_worst_case(n, b.min_k, DOMAIN), presorted=True)
    assert d.loss_sf(b.min_k) <= beta
    assert d.fair_quantile(1 - beta) <= b.fair_bound * (1 + REL)
    assert d.swdiff_quantile(1 - beta) <= b.swdiff_bound_corrected * (1 + REL)
    rng = np.random.default_rng(n)
    for _ in range(10):
        x = random_ctm(rng, n)
        dd = mech.distribution(x)
        assert dd.fair_quantile(1 - beta) <= b.fair_bound * (1 + REL)
        assert dd.swdiff_quantile(1 - beta) <= b.swdiff_bound_corrected * (1 + REL)


def test_point_mass_breaks_the_papers_swdiff_bound_but_not_the_corrected_one():
    """All agents at one point (a CTM data set): E[SWDIFF] = m/(2ε), not O(m/(nε²))."""
    n, eps, beta = 10_001, 1.0, 0.05
    d = DPExpMed(eps, DOMAIN).distribution(np.full(n, 0.5))
    assert d.expected_swdiff() == pytest.approx(1 / (2 * eps), rel=1e-6)
    b = ctm_bounds(n, 1.0, eps, beta)
    q = d.swdiff_quantile(1 - beta)
    assert q > 10 * b.swdiff_bound_paper
    assert q <= b.swdiff_bound_corrected


def test_kstar_formula_spot_value():
    n, eps, beta = 1001, 1.0, 0.05
    alpha = 1 / (n * eps)
    g = (1 - math.exp(-eps * 500 / 2)) / (1 - math.exp(-eps / 2))
    expected = math.ceil(-1 + (2 / eps) * math.log(2 * g / (alpha * beta * 500)))
    assert ctm_kstar(n, eps, beta) == expected
    assert ctm_min_k(n, eps, beta) <= expected


@pytest.mark.parametrize("n", [51, 201])
@pytest.mark.parametrize("lam", [0.03, 0.1])
def test_spm_tail_bound_holds_on_the_spm_worst_cases(n, lam):
    eps = 1.0
    mech = DPExpMed(eps, DOMAIN)
    s = math.ceil(lam * n) - 1
    for k in range(0, n // 2 - s + 1, 3):
        d = mech.distribution(spm_worst_case(n, k, lam, DOMAIN))
        bound = float(spm_tail_bound(k, n, eps, lam))
        assert d.loss_sf(k) <= bound * (1 + REL) + 1e-15 + _cell_slack(d)


def test_spm_fair_bound_on_samples_from_a_single_peaked_law():
    law = truncated_normal_law(DOMAIN, peak=0.4, scale=0.2)
    rng = np.random.default_rng(9)
    for n in (201, 2001):
        x = law.sample(n, rng)
        lam = ks_distance(x, law.cdf)
        for eps in (0.5, 1.0):
            d = DPExpMed(eps, DOMAIN).distribution(x)
            assert d.fair_quantile(0.95) <= spm_fair_bound(n, 1.0, eps, 0.05, lam)


@pytest.mark.parametrize("n", [1, 2, 11, 12])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_impossibility_holds_exactly_for_every_mechanism(n, eps):
    """Thm 5.1: on the bimodal pair, max_i P(FAIR ≥ m/2) ≥ 1/(1 + e^ε), for each mechanism."""
    pair = impossibility_pair(n, DOMAIN)
    mechs = [DPExpMed(eps, DOMAIN), unwidened_expmed(eps, DOMAIN), LaplaceMedian(eps, DOMAIN),
             GridExpMed(eps, DOMAIN, grid_size=101), GridExpMed(eps, DOMAIN, grid_size=100)]
    for mech in mechs:
        probs = [mech.distribution(d).fair_sf(0.5, inclusive=True)
                 for d in (pair.first, pair.second)]
        assert max(probs) >= impossibility_bound(eps) * (1 - 1e-12), type(mech).__name__


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0])
def test_thm_7_21_pair_bound_holds_for_dpexpmed(eps):
    pair = fair_lower_bound_pair(41, 3, DOMAIN)
    mech = DPExpMed(eps, DOMAIN)
    probs = [mech.distribution(d).fair_sf(pair.radius) for d in (pair.first, pair.second)]
    assert max(probs) >= direct_lower_bound(eps, pair.distance) * (1 - 1e-12)


def test_table1_entries():
    t = table1(1001, 2.0, 0.5, 0.01, 0.03)
    l1 = math.log(100)
    assert t.ctm_fair_upper == pytest.approx(2.0 / (1001 * 0.5) * l1)
    # SWDIFF upper rates: the paper's (refuted, kept as *_paper) plus the corrected m/ε
    assert t.ctm_swdiff_upper_paper == pytest.approx(2.0 / (1001 * 0.25) * l1**2)
    assert t.ctm_swdiff_upper == pytest.approx(t.ctm_swdiff_upper_paper + 2.0 / 0.5)
    assert t.spm_fair_lower == pytest.approx(t.ctm_fair_lower + 2.0 * 0.03)
    lnl = math.log(1001 * 0.03 / 0.01)
    assert t.spm_swdiff_upper_paper == pytest.approx(
        2.0 / (1001 * 0.25) * lnl**2 + 2.0 * 0.03 / 0.5)
    assert t.spm_swdiff_upper == pytest.approx(t.spm_swdiff_upper_paper + 2.0 / 0.5)
    assert t.swdiff_upper_corrected is True and t.to_dict()["swdiff_upper_corrected"] is True
    assert t.general_fair_lower == 1.0
    assert t.general_fair_lower_probability == pytest.approx(1 / (1 + math.exp(0.5)))
    assert set(t.to_dict()) >= {"ctm_fair_lower", "spm_swdiff_upper"}

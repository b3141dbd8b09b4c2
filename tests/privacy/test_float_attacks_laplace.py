"""Floating-point attacks on the Laplace releases of CDP-Fair (issue 11), and the noise law.

For the certificate check D̃ and the Laplace count m̃₁: neighbours that differ only in the
last bits of one record give bit-identical releases under a common seed; neighbours whose
integer statistic changes give released − statistic bit-identical, with an exact pmf
ratio ≤ e^ε (rational arithmetic); and the executed noise has the exact discrete Laplace
law at the scales these releases use (tests with failure probability < 1e-6,
``tests/_stats.py``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpfair.mechanisms.discrete_laplace as dl
from dpfair.fairclass._certify import (
    certification_margin,
    check_lattice,
    check_threshold,
    check_units,
)
from dpfair.fairclass._laplace_count import count_lattice, noisy_count
from dpfair.fairclass._threshold import DDSteps
from dpfair.mechanisms.discrete_laplace import (
    bernoulli_exp,
    discrete_laplace_scale,
    lattice_laplace,
    sample_discrete_laplace,
)
from tests._stats import FAIL_PROB


def _steps(value: float) -> DDSteps:
    return DDSteps(np.array([0.0]), np.array([value, value]), np.array([value]))


def _check(value: float, m1: float, m0: float, eps: float, seed: int) -> float:
    return check_threshold(
        _steps(value), 0.3, m1, m0, 0.1, margin=0.01, target=0.05, epsilon_check=eps,
        fail_prob=0.05, rng=np.random.default_rng(seed),
    ).released_dd


# ------------------------------------------------------------------ certificate check
def test_check_last_bits_of_dd_are_invisible():
    """DD̂ moved by a few ulps (the rounding of one record's ratio) without crossing a lattice
    midpoint: bit-identical releases under every common seed."""
    m1, m0 = 400.37, 599.81
    k, _ = check_lattice(m1, m0, 1.0)
    v = 120 / m1 - 200 / m0
    v2 = float(np.nextafter(np.nextafter(v, 1.0), 1.0))
    assert v != v2 and np.rint(v * 2.0**k) == np.rint(v2 * 2.0**k)
    for seed in range(100):
        assert _check(v, m1, m0, 1.0, seed) == _check(v2, m1, m0, 1.0, seed)


def test_check_neighbouring_counts_translate_exactly_with_ratio_at_most_e_eps():
    """c₁ = 120 vs 121: released·2^k − S is the same integer under a common seed, every
    output is a lattice point, and the exact pmf ratio is ≤ e^{ε_k} (Δ_L/t ≤ ε_k)."""
    m1, m0, eps = 400.37, 599.81, 1.0
    k, t = check_lattice(m1, m0, eps)
    _, units = check_units(m1, m0, eps)
    vals = [c1 / m1 - 200 / m0 for c1 in (120, 121)]
    stats_ = [int(np.rint(v * 2.0**k)) for v in vals]
    assert 0 < abs(stats_[1] - stats_[0]) <= units
    assert Fraction(units) / t <= Fraction(eps)
    # the executed Δ_L is the real Δ in lattice units plus at most 2 units
    delta = Fraction(1) / Fraction(m1) + Fraction(1) / Fraction(m0)
    assert units <= delta * 2**k + 2
    for seed in range(200):
        out = [_check(v, m1, m0, eps, seed) for v in vals]
        z = [o * 2.0**k - s for o, s in zip(out, stats_, strict=True)]
        assert z[0] == z[1] == round(z[0])
    # pmf ratio at every released integer j: exp((|j − S′| − |j − S|)/t) ≤ exp(Δ_L/t).
    js = np.arange(min(stats_) - 5 * t, max(stats_) + 5 * t, max(t // 50, 1))
    diff = np.abs(js - stats_[1]) - np.abs(js - stats_[0])
    assert int(np.max(np.abs(diff))) <= units


@pytest.mark.parametrize("seed", range(3))
def test_check_sensitivity_bound_holds_for_computed_ratios(seed):
    """Adversarial sweep: neighbours (one record joins/leaves/changes group) under random
    released denominators; the computed snapped statistics never move by more than Δ_L."""
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        n = int(rng.integers(20, 10**7))
        m1 = float(np.clip(rng.uniform(-0.1, 1.1) * n, 1.0, n - 1.0))
        m1 = math.ldexp(round(math.ldexp(m1, 20)), -20)  # a lattice value, as released
        m0 = n - m1
        eps = float(rng.choice([0.01, 0.3, 1.0, 7.0]))
        k, units = check_units(m1, m0, eps)
        c1, c0 = int(rng.integers(0, n)), int(rng.integers(0, n))
        moves = [(c1 + 1, c0), (c1, c0 + 1), (c1 + 1, max(c0 - 1, 0)), (max(c1 - 1, 0), c0 + 1)]
        s = int(np.rint((c1 / m1 - c0 / m0) * 2.0**k))
        for a, b in moves:
            s2 = int(np.rint((a / m1 - b / m0) * 2.0**k))
            assert abs(s2 - s) <= units
        assert Fraction(units) / discrete_laplace_scale(units, eps) <= Fraction(eps)


def test_margin_includes_the_lattice_slack():
    """The margin is computed on the executed scales and adds the coupling slack."""
    m1, m0 = 1500.0, 1500.0
    k, t_w = check_lattice(m1, m0, 0.35)
    k_c, t_c = count_lattice(3000, 0.25)
    assert t_w * 2.0**-k >= (1 / m1 + 1 / m0) / 0.35
    assert t_c * 2.0**-k_c >= 1 / 0.25
    t = certification_margin(m1, m0, epsilon_count=0.25, epsilon_check=0.35,
                             fail_prob_side=0.025)
    assert t > 1.5 * 2.0**-k


# ------------------------------------------------------------------ Laplace count
@pytest.mark.parametrize(("n", "eps"), [(1000, 0.25), (24_421, 0.1), (10**6, 2.0)])
def test_count_translates_exactly_with_ratio_at_most_e_eps(n, eps):
    """Counts c and c + 1: released − c bit-identical under a common seed (the integer noise
    is the same), and the pmf ratio is ≤ exp(2^k/t) ≤ e^ε exactly."""
    k, t = count_lattice(n, eps)
    assert Fraction(2**k) / t <= Fraction(eps)
    assert t <= dl.MAX_SCALE
    c = n // 3
    for seed in range(100):
        a = noisy_count(c, n, eps, np.random.default_rng(seed))
        b = noisy_count(c + 1, n, eps, np.random.default_rng(seed))
        assert a - c == b - (c + 1)
        assert a * 2.0**k == round(a * 2.0**k)


def test_count_as_used_by_both_fit_paths_is_one_function():
    """In-memory and out-of-core S2 are one function (one pipeline): m̃₁ is drawn by one call."""
    import inspect

    from dpfair.fairclass import _estimators, _pipeline, outofcore

    assert "noisy_count(" in inspect.getsource(_pipeline.s2_threshold)
    for module in (_estimators, _pipeline, outofcore):
        assert "rng.laplace" not in inspect.getsource(module)


# ------------------------------------------------------------------ exactness of the law
def _binned_laplace_probs(t: int, edges: np.ndarray) -> np.ndarray:
    """P(a ≤ Z < b) for consecutive integer edges, from P(Z ≥ z) = q^z/(1+q) (z ≥ 1)."""
    q = math.exp(-1.0 / t)

    def sf(z: np.ndarray) -> np.ndarray:  # P(Z ≥ z)
        z = np.asarray(z, dtype=np.float64)
        return np.where(z >= 1, np.exp(-z / t) / (1 + q), 1 - np.exp((z - 1) / t) / (1 + q))

    return sf(edges[:-1]) - sf(edges[1:])


def _chi2_against_law(z: np.ndarray, t: int, edges: np.ndarray) -> float:
    p = _binned_laplace_probs(t, edges)
    cell = np.searchsorted(edges, z, side="right") - 1  # a ≤ z < b (half-open, also last)
    inside = (cell >= 0) & (cell < edges.size - 1)
    obs = np.bincount(cell[inside], minlength=edges.size - 1)
    inner = p.sum()
    observed = np.append(obs, z.size - obs.sum())
    expected = np.append(p, max(1.0 - inner, 0.0)) * z.size
    keep = expected > 0
    return float(stats.chisquare(observed[keep], expected[keep] * observed[keep].sum()
                                 / expected[keep].sum()).pvalue)


@pytest.mark.parametrize("t", [1, 2, 7])
def test_small_scales_match_pmf_value_by_value(t):
    z = sample_discrete_laplace(t, 200_000, np.random.default_rng(100 + t))
    edges = np.arange(-6 * t - 1, 6 * t + 2)  # one bin per value, tails pooled
    assert _chi2_against_law(z, t, edges) > FAIL_PROB


def test_scales_used_by_check_and_count_match_the_law():
    """Chi-square in 40 bins at the executed scales (check at ε_k = 0.35, n = 3000; count at
    ε_c = 0.25): the low-order structure is covered by the small-scale test above and by
    the exact round structure, the bulk here."""
    _, t_w = check_lattice(1500.0, 1500.0, 0.35)
    _, t_c = count_lattice(3000, 0.25)
    for i, t in enumerate((t_w, t_c)):
        z = sample_discrete_laplace(t, 200_000, np.random.default_rng(7 + i))
        edges = np.unique(np.round(np.linspace(-5, 5, 41) * t).astype(np.int64))
        assert _chi2_against_law(z, t, edges) > FAIL_PROB
        # parity is exactly P(Z even) = (1 − q)(1 + q²)/((1 + q)(1 − q²)) ≈ ½ here
        even = int(np.sum(z % 2 == 0))
        q = math.exp(-1.0 / t)
        p_even = (1 - q) / (1 + q) * (1 + 2 * q * q / (1 - q * q))
        lo, hi = stats.binom.ppf(FAIL_PROB / 2, z.size, p_even), stats.binom.isf(
            FAIL_PROB / 2, z.size, p_even)
        assert lo <= even <= hi


def test_lattice_laplace_release_law():
    """(S + Z)·2^-k: the noise of 4,000 releases at S = 0 has the law of Z (bulk bins)."""
    gen = np.random.default_rng(3)
    t = discrete_laplace_scale(2**10, 0.5)
    z = np.array([lattice_laplace(0, 2**10, 0.5, 10, gen) for _ in range(4_000)]) * 2**10
    assert np.all(z == np.round(z))
    edges = np.unique(np.round(np.linspace(-4, 4, 17) * t).astype(np.int64))
    assert _chi2_against_law(z.astype(np.int64), t, edges) > FAIL_PROB


def test_one_draw_bernoulli_e_inverse_and_its_continuation(monkeypatch):
    """Bernoulli(e^{-1}) from one integer: frequency e^{-1}; with N = 3 the continuation of
    Alg. 1 past N (probability 1/6 then) runs often and the frequency is still e^{-1}."""
    n = 400_000
    p = math.exp(-1.0)
    lo, hi = stats.binom.ppf(FAIL_PROB / 4, n, p), stats.binom.isf(FAIL_PROB / 4, n, p)
    hits = int(dl._bernoulli_exp_one(n, np.random.default_rng(11)).sum())
    assert lo <= hits <= hi
    monkeypatch.setattr(dl, "_FACT_N", 3)
    monkeypatch.setattr(dl, "_FACT_THRESHOLDS", np.array([1, 3, 6], dtype=np.int64))
    hits = int(dl._bernoulli_exp_one(n, np.random.default_rng(12)).sum())
    assert lo <= hits <= hi


def test_geometric_part_and_int64_fallback():
    """V ~ Geometric(1 − e^{-1}) (chi-square on 0..5+), and Bernoulli(exp(−1/2)) with den =
    2^62 (k·den overflows int64 from k = 2: the two-draw product path)."""
    v = dl._geometric_e(200_000, np.random.default_rng(5), cap=64)
    p = np.array([math.exp(-j) * (1 - math.exp(-1)) for j in range(6)])
    obs = np.append(np.bincount(np.minimum(v, 6), minlength=7)[:6], int(np.sum(v >= 6)))
    exp_ = np.append(p, 1 - p.sum()) * v.size
    assert stats.chisquare(obs, exp_).pvalue > FAIL_PROB
    n = 200_000
    hits = int(bernoulli_exp(np.full(n, 2**61), 2**62, np.random.default_rng(6)).sum())
    q = math.exp(-0.5)
    assert stats.binom.ppf(FAIL_PROB / 2, n, q) <= hits <= stats.binom.isf(FAIL_PROB / 2, n, q)

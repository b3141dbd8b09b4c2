"""Exact discrete Gaussian sampler (CKS 2020, Alg. 3): frequencies against the exact pmf."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

from dpfair import InvalidParameterError
from dpfair.mechanisms.discrete_gaussian import bernoulli_exp_big, sample_discrete_gaussian
from tests._stats import FAIL_PROB

N_DRAWS = 60_000


def _bin_probs(variance: Fraction, edges: np.ndarray) -> np.ndarray:
    """P(a ≤ Z < b) for consecutive edges, plus the two tails, for Z ~ N_ℤ(0, σ²).

    Small σ: exact sums of exp(−z²/(2σ²)) over |z| ≤ 40σ + 10 (the rest is < e^-800).
    Large σ (≥ 100): the normaliser is σ√(2π)(1 + 2Σe^{−2π²σ²k²}) = σ√(2π) to double
    precision (Poisson summation), and Σ_{z=a}^{b−1} φ(z) is the midpoint rule for
    ∫_{a−1/2}^{b−1/2} φ, exact up to a relative O(σ^-2) ≤ 1e-4 of each bin (Euler–Maclaurin),
    far below what 60,000 draws resolve.
    """
    s2 = float(variance)
    sigma = math.sqrt(s2)
    if sigma < 100:
        zmax = int(40 * sigma) + 10
        z = np.arange(-zmax, zmax + 1)
        w = np.exp(-(z.astype(float) ** 2) / (2 * s2))
        w /= w.sum()
        cdf_at = np.concatenate(([0.0], np.cumsum(w)))  # P(Z < z) at z = -zmax..zmax+1
        below = np.interp(edges, np.arange(-zmax, zmax + 2), cdf_at)
    else:
        below = special.ndtr((edges - 0.5) / sigma)
    inner = np.diff(below)
    return np.concatenate(([below[0]], inner, [1.0 - below[-1]]))


def _binned(z: np.ndarray, edges: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(edges, z, side="right")  # 0: below edges[0]; len: ≥ edges[-1]
    return np.bincount(idx, minlength=edges.size + 1)


def _edges(variance: Fraction) -> np.ndarray:
    sigma = math.sqrt(float(variance))
    if sigma < 8:
        hi = math.ceil(4 * sigma) + 1
        return np.arange(-hi, hi + 1)  # unit bins: every atom of the bulk separately
    return np.unique(np.round(np.linspace(-3.5, 3.5, 41) * sigma)).astype(np.int64)


def _chi2_pvalue(z: np.ndarray, variance: Fraction) -> float:
    edges = _edges(variance)
    p = _bin_probs(variance, edges)
    obs = _binned(z, edges)
    keep = p * z.size >= 5  # pool sparse cells into the largest one
    exp_counts = p * z.size
    obs_k = np.append(obs[keep], obs[~keep].sum())
    exp_k = np.append(exp_counts[keep], exp_counts[~keep].sum())
    if exp_k[-1] < 5:
        obs_k[-2] += obs_k[-1]
        exp_k[-2] += exp_k[-1]
        obs_k, exp_k = obs_k[:-1], exp_k[:-1]
    exp_k *= obs_k.sum() / exp_k.sum()
    return float(stats.chisquare(obs_k, exp_k).pvalue)


@pytest.mark.parametrize(
    "variance",
    [
        Fraction(1, 4),
        Fraction(1),
        Fraction(9),
        Fraction(16),
        Fraction(7, 3),
        Fraction(4097 * 4096),
        Fraction(10**8),
        Fraction(2**50),
        Fraction(2**80),
    ],
    ids=[
        "sigma0.5", "sigma1", "sigma3", "sigma4-t|S", "var7/3", "4^12-t|S", "sigma1e4",
        "sigma2^25-t|S", "sigma2^40",
    ],
)
def test_matches_exact_pmf(variance):
    """Chi-square of 60,000 draws against the exact pmf (p-value > 1e-6 for a correct sampler).

    Covers every path: D = 2σ² with t | σ² (16, 4097·4096 as ``LatticeNoise`` makes it,
    2^50 as the GP's), D = 2pq·t² ≤ 2^62 (1/4, 1, 9, 7/3, 10^8) — both with the exact
    digit tables — and D > 2^62 (2^80: CKS Algorithm 1 on Python integers); 60,000 draws
    take 15 rounds of at most 4,096 outputs."""
    z = sample_discrete_gaussian(variance, N_DRAWS, np.random.default_rng(11))
    assert z.dtype == np.int64 and z.shape == (N_DRAWS,)
    assert _chi2_pvalue(z, variance) > FAIL_PROB


@pytest.mark.parametrize("variance", [Fraction(1, 4), Fraction(9), Fraction(2**80)])
def test_symmetric(variance):
    """#{Z > 0} ~ Binomial(#{Z ≠ 0}, 1/2): two-sided bound at 1e-6."""
    z = sample_discrete_gaussian(variance, N_DRAWS, np.random.default_rng(5))
    nz = int(np.sum(z != 0))
    pos = int(np.sum(z > 0))
    lo, hi = stats.binom.ppf(FAIL_PROB / 2, nz, 0.5), stats.binom.isf(FAIL_PROB / 2, nz, 0.5)
    assert lo <= pos <= hi


@pytest.mark.parametrize("variance", [Fraction(1, 4), Fraction(1)])
def test_rounded_continuous_normal_is_detected(variance):
    """Power: the same test rejects round(N(0, σ²)), the law a float-rounding sampler gives."""
    g = np.random.default_rng(3)
    wrong = np.rint(g.normal(0.0, math.sqrt(float(variance)), N_DRAWS)).astype(np.int64)
    assert _chi2_pvalue(wrong, variance) < FAIL_PROB


def test_wrong_acceptance_is_detected(monkeypatch):
    """Power: an acceptance computed for a 10% larger σ² is caught (σ² = 9)."""
    from dpfair.mechanisms import discrete_gaussian as dg

    real = dg._exponents

    def skewed(u, x, t, p, q, big_b):
        p2, q2 = p * 11, q * 10
        return real(u, x, t, p2, q2, 2 * p2 * q2 * t * t)

    monkeypatch.setattr(dg, "_exponents", skewed)
    z = sample_discrete_gaussian(9, N_DRAWS, np.random.default_rng(7))
    assert _chi2_pvalue(z, Fraction(9)) < FAIL_PROB


def test_atom_at_zero_small_sigma():
    """#{Z = 0} for σ² = 1 against Binomial(n, 1/θ), θ = Σ e^{−k²/2}: two-sided at 1e-6."""
    z = sample_discrete_gaussian(1, N_DRAWS, np.random.default_rng(9))
    ks = np.arange(-60, 61)
    w = np.exp(-(ks.astype(float) ** 2) / 2)
    p0 = w[60] / w.sum()
    zeros = int(np.sum(z == 0))
    lo = stats.binom.ppf(FAIL_PROB / 2, N_DRAWS, p0)
    hi = stats.binom.isf(FAIL_PROB / 2, N_DRAWS, p0)
    assert lo <= zeros <= hi


def test_bernoulli_exp_big_frequency():
    """Denominators above 2^62 (lazy 62-bit comparison): exp(−3/4) and exp(−1/3) frequencies."""
    n = 20_000
    for num, den in [(3 * 2**70, 4 * 2**70), (2**100 + 1, 3 * 2**100 + 3)]:
        hits = int(bernoulli_exp_big([num] * n, den, np.random.default_rng(1)).sum())
        p = math.exp(-num / den)
        lo, hi = stats.binom.ppf(FAIL_PROB / 2, n, p), stats.binom.isf(FAIL_PROB / 2, n, p)
        assert lo <= hits <= hi
    assert bernoulli_exp_big([0] * 50, 2**70, 0).all()  # exp(0) = 1
    with pytest.raises(InvalidParameterError, match="num <= den"):
        bernoulli_exp_big([2**71], 2**70)


def test_same_seed_same_draws_and_shape():
    a = sample_discrete_gaussian(Fraction(5, 2), (3, 4), 2)
    b = sample_discrete_gaussian(Fraction(5, 2), (3, 4), 2)
    assert a.shape == (3, 4) and np.array_equal(a, b)


def test_exp_table_and_exact_tie_continuation():
    """c_v = ⌊e^{−v}2^62⌋; on a tie u = c_v, U < e^{−v} has probability frac(e^{−v}2^62)."""
    from dpfair.mechanisms import discrete_gaussian as dg

    for v in (1, 5, 42):
        assert abs(dg._EXP_TABLE[v] - math.exp(-v) * 2.0**62) <= 2.0**62 * 1e-15 + 1
    # the conditional probability on a tie, from 124 exact bits
    frac = (dg._exp_neg_floor(1, 124) - (dg._EXP_TABLE[1] << 62)) / 2.0**62
    g = np.random.default_rng(8)
    n = 4000
    hits = sum(dg._Uniform(dg._EXP_TABLE[1], g).below_exp_neg(1) for _ in range(n))
    lo, hi = stats.binom.ppf(FAIL_PROB / 2, n, frac), stats.binom.isf(FAIL_PROB / 2, n, frac)
    assert lo <= hits <= hi
    # ⌊E⌋ above the table: exact e^{-43} with a zero prefix decided by further digits
    out = dg._bernoulli_exp_int(np.array([43, 0, 1]), np.array([0, 5, 2**62 - 1]), g)
    assert out[1] and not out[2]


def test_geometric_overflow_guard_and_forced_continuation():
    """u = 0 (and ties u = c_v) continue with further digits; a continued V above the
    int64 limit raises instead of wrapping."""
    from dpfair.mechanisms import discrete_gaussian as dg

    g = np.random.default_rng(14)
    u = np.array([0, dg._EXP_TABLE[3], 1, dg._EXP_TABLE[3] + 1], dtype=np.int64)
    v = dg._geometric_e(u, g)
    assert v[0] >= 42 and v[1] in (2, 3) and v[2] == 42 and v[3] == 2
    with pytest.raises(OverflowError):
        dg._geometric_e(np.array([0], dtype=np.int64), g, limit=10)


def test_batch_sizing_matches_the_acceptance_rate():
    """The float acceptance rate only sizes the batches; it is close to the empirical one."""
    from dpfair.mechanisms import discrete_gaussian as dg

    for s in (16, 4097 * 4096, 2**50):
        plan = dg._plan(s, 1)
        assert plan.tables is not None and plan.tables.den == 2 * s
        g = np.random.default_rng(15)
        m = 40_000
        w = dg._raw62((2 + plan.tables.rows) * m, g).reshape(2 + plan.tables.rows, m)
        u, x, positive = dg._candidates_from(w[0], w[1], plan.t, g)
        fl, rem, _den = dg._exponents(u, x, plan.t, s, 1, plan.big_b)
        ok = dg.decide_exp(fl, np.asarray(rem), plan.tables, w[2:], g) & ((x > 0) | positive)
        k = int(ok.sum())
        lo = stats.binom.ppf(FAIL_PROB / 2, m, plan.accept)
        hi = stats.binom.isf(FAIL_PROB / 2, m, plan.accept)
        assert lo <= k <= hi, (s, k / m, plan.accept)


def test_geometric_e_law():
    """V = ⌊−ln U⌋ from 62-bit prefixes: P(V = v) = e^{−v}(1 − e^{−1}), chi-square at 1e-6."""
    from dpfair.mechanisms import discrete_gaussian as dg

    g = np.random.default_rng(12)
    v = dg._geometric_e(g.integers(0, 2**62, size=N_DRAWS, dtype=np.int64), g)
    top = 8
    obs = np.bincount(np.minimum(v, top), minlength=top + 1)
    p = np.array([math.exp(-k) * (1 - math.exp(-1)) for k in range(top)] + [math.exp(-top)])
    assert stats.chisquare(obs, p * N_DRAWS).pvalue > FAIL_PROB


def test_exponents_match_python_integers_on_every_path():
    """⌊E⌋ and the remainder of E = U/t + (X − σ²/t)²/(2σ²) against Python integers, for the
    int64 fast path, its per-entry overflow fallback, and the generic and big paths."""
    from dpfair.mechanisms import discrete_gaussian as dg

    g = np.random.default_rng(13)
    for p, q in [(2**24 * 4096, 1), (9, 1), (7, 3), (2**80, 1), (2**50 * 2**25, 1)]:
        t = dg._laplace_scale(p, q)
        u = g.integers(0, t, size=50)
        x = u + t * g.integers(0, 60, size=50)
        x[:3] = [0, 2**40 + 5, 2**45 + 7]  # includes |e| ≥ 2^31 entries
        fl, rem, den = dg._exponents(u, x, t, p, q, 2 * p * q * t * t)
        for i in range(50):
            e = Fraction(int(u[i]), t) + Fraction((int(x[i]) * t * q - p) ** 2, 2 * p * q * t * t)
            assert min(math.floor(e), 2**62) == int(fl[i])
            assert Fraction(int(rem[i]), den) == e - math.floor(e)

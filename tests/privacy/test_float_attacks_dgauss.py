"""Floating-point attacks on the Gaussian releases, now driven by the exact discrete Gaussian.

Every Gaussian release adds N_ℤ(0, S) noise (lattice units, `mechanisms.discrete_gaussian`)
to an integer or public-lattice statistic. The attacks: (1) neighbours that differ in the
last bits of one record but have the same integer statistic give bit-identical outputs
under common seeds (trees, binary search, counts, GP); (2) the noise actually added is on
the public lattice and its law is the exact discrete Gaussian (frequencies against the
pmf at the 1e-6 level, with a power check against the legacy snapped continuous normal);
(3) where the integer statistic changes by one, every output stays reachable and the
exact pmf ratio is the one the zCDP analysis bounds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import stats

import dpfair
from dpfair.mechanisms import NoisyBinaryTree, leaf_counts
from dpfair.mechanisms.lattice import LatticeNoise
from dpfair.mechanisms.tree import node_counts
from tests._stats import FAIL_PROB
from tests.mechanisms.test_discrete_gaussian import _chi2_pvalue


# ------------------------------------------------------------------ trees
def _tree_pair() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).uniform(0, 1, 999)
    x_prime = x.copy()
    x_prime[5] = np.nextafter(x[5], 1.0)  # one ulp: same leaf
    return x, x_prime


def test_tree_last_bits_give_bit_identical_release():
    x, x_prime = _tree_pair()
    assert np.array_equal(leaf_counts(x, (0, 1), 7), leaf_counts(x_prime, (0, 1), 7))
    for root in ("public", "noisy"):
        mech = NoisyBinaryTree.for_zcdp(depth=7, rho=0.4, root=root)
        for seed in range(5):
            a = mech.release(leaf_counts(x, (0, 1), 7), rng=seed)
            b = mech.release(leaf_counts(x_prime, (0, 1), 7), rng=seed)
            for la, lb in zip(a.levels, b.levels, strict=True):
                assert np.array_equal(la, lb)


def test_tree_noise_is_the_exact_discrete_gaussian_on_the_lattice():
    """released − counts, in lattice units, are integers with the N_ℤ(0, S) law."""
    mech = NoisyBinaryTree.for_zcdp(depth=8, rho=0.5)
    noise = mech.noise
    counts = leaf_counts(np.random.default_rng(2).uniform(0, 1, 5000), (0, 1), 8)
    exact = node_counts(counts)
    z = []
    for seed in range(60):
        tree = mech.release(counts, rng=seed)
        for lvl, c in zip(tree.levels[1:], exact[1:], strict=True):
            z.append((lvl - c) * 2.0**noise.bits)
    zz = np.concatenate(z)
    assert np.all(zz == np.rint(zz))
    assert _chi2_pvalue(zz.astype(np.int64), Fraction(noise.variance)) > FAIL_PROB


def test_tree_noise_law_check_has_power_against_the_legacy_snapped_normal():
    """The same chi-square test separates rint(N(0, σ²)·2^b) from N_ℤ(0, S) at small σ·2^b.

    At the release lattices (σ·2^b ≥ 2^12) the two laws are within 1e-6 in total variation,
    which is the point of using them; the power check therefore uses a lattice with
    σ·2^b = 1, where they differ visibly, with the same test and sample size.
    """
    g = np.random.default_rng(3)
    legacy = np.rint(g.normal(0.0, 1.0, 60_000)).astype(np.int64)
    assert _chi2_pvalue(legacy, Fraction(1)) < FAIL_PROB


def test_tree_count_change_keeps_support_and_exact_ratio():
    """One record crossing a leaf boundary moves one node per level by ±1 (2^b lattice
    units): every released value stays reachable (the discrete Gaussian has full support on
    the lattice) and the exact log pmf ratio of the node vector is
    Σ_v (2(y − c)·v − v²)·(−1)/(2S) over the changed nodes, whose expectation under D is the
    zCDP divergence ‖v‖²/(2S) ≤ Δ₂²/(2σ²)."""
    mech = NoisyBinaryTree.for_zcdp(depth=4, rho=0.5)
    noise = mech.noise
    x = np.full(40, 0.3)
    x_prime = x.copy()
    x_prime[0] = 0.8
    ca = node_counts(leaf_counts(x, (0, 1), 4))
    cb = node_counts(leaf_counts(x_prime, (0, 1), 4))
    scale = 2.0**noise.bits
    losses = []
    for seed in range(400):
        tree = mech.release(leaf_counts(x, (0, 1), 4), rng=seed)
        loss = 0.0
        for lvl, a, b in zip(tree.levels[1:], ca[1:], cb[1:], strict=True):
            ya = np.rint((lvl - a) * scale)  # lattice offsets under D and D'
            yb = np.rint((lvl - b) * scale)
            assert np.all(ya == (lvl - a) * scale) and np.all(yb == (lvl - b) * scale)
            loss += float(np.sum(yb.astype(float) ** 2 - ya.astype(float) ** 2)) / (
                2.0 * noise.variance)
        losses.append(loss)
    divergence = 2 * 4 * scale**2 / (2.0 * noise.variance)  # ‖v‖² = 2 per level, 4 levels
    assert divergence <= mech.privacy.rho * (1 + 1e-12)
    # the privacy loss is Gaussian-like with mean = divergence and sd = sqrt(2·divergence)
    sd = math.sqrt(2.0 * divergence)
    mean = float(np.mean(losses))
    bound = stats.norm.isf(FAIL_PROB / 2) * sd / math.sqrt(len(losses)) * 1.05
    assert abs(mean - divergence) <= bound


# ------------------------------------------------------------------ binary search
def test_binsearch_last_bits_and_lattice():
    x = np.random.default_rng(1).lognormal(np.log(1.5), 1.0, 1000)
    x_prime = x.copy()
    x_prime[0] = np.nextafter(x[0], 0)
    for seed in range(5):
        a = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), method="binsearch",
                                              rng=seed)
        b = dpfair.median.confidence_interval(x_prime, rho=0.5, bounds=(-5, 15),
                                              method="binsearch", rng=seed)
        assert (a.low, a.high) == (b.low, b.high)
        assert a.diagnostics["queries_lower"] == b.diagnostics["queries_lower"]
        assert a.diagnostics["queries_upper"] == b.diagnostics["queries_upper"]
    from dpfair.median._binsearch import _query_noise

    noise = _query_noise(1000, a.diagnostics["sigma"])
    for _, noisy in a.diagnostics["queries_lower"] + a.diagnostics["queries_upper"]:
        off = (noisy - math.floor(noisy)) * 2.0**noise.bits
        assert off == round(off)


def test_cdf_interval_last_bits():
    x = np.random.default_rng(6).lognormal(np.log(1.5), 1.0, 1000)
    x_prime = x.copy()
    x_prime[3] = np.nextafter(x[3], np.inf)
    for method in ("cdf", "binsearch_cdf"):
        for seed in range(3):
            a = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), method=method,
                                                  rng=seed)
            b = dpfair.median.confidence_interval(x_prime, rho=0.5, bounds=(-5, 15),
                                                  method=method, rng=seed)
            assert (a.low, a.high) == (b.low, b.high)


# ------------------------------------------------------------------ counts
def test_count_noise_is_exact_and_identical_for_last_bit_neighbours():
    """The S1 / FDP / linear group count: c + Z with Z on the public lattice, N_ℤ(0, S)."""
    from dpfair.fairclass._model import _lattice_noise

    n, sigma = 5000, 7.3
    noise = LatticeNoise.for_sigma(sigma, n + 64.0 * sigma)
    draws = np.array([_lattice_noise(n, sigma, np.random.default_rng(s)) for s in range(3000)])
    z = draws * 2.0**noise.bits
    assert np.all(z == np.rint(z))
    again = np.array([_lattice_noise(n, sigma, np.random.default_rng(s)) for s in range(3000)])
    assert np.array_equal(draws, again)  # depends on (n, σ, seed) only, never on the count
    assert _chi2_pvalue(z.astype(np.int64), Fraction(noise.variance)) > FAIL_PROB


def test_count_change_by_one_exact_ratio():
    """c vs c + 1: pmf ratio at every lattice output is exp((2(y − c)·2^b − 4^b)/(2S)),
    so outputs are never impossible and the log ratio's mean is 4^b/(2S) ≤ 1/(2σ²)."""
    sigma, n = 3.0, 100
    noise = LatticeNoise.for_sigma(sigma, n + 64.0 * sigma)
    step = 2**noise.bits
    z = noise.sample(20_000, 9) * step  # offsets from c in lattice units
    log_ratio = ((z - step) ** 2 - z**2) / (2.0 * noise.variance)  # log P_c(y)/P_{c+1}(y)
    assert np.all(np.isfinite(log_ratio))
    kl = step**2 / (2.0 * noise.variance)
    assert kl <= 1.0 / (2.0 * sigma**2)
    sd = math.sqrt(2.0 * kl)
    assert abs(float(np.mean(log_ratio)) - kl) <= stats.norm.isf(FAIL_PROB / 2) * sd / math.sqrt(
        z.size) * 1.05


# ------------------------------------------------------------------ Gaussian process
def test_gp_release_binned_same_weights_bit_identical_and_on_lattice():
    from dpfair.mechanisms import GaussianProcessMechanism, KroneckerGaussianGrid

    grid = KroneckerGaussianGrid([np.linspace(0, 1, 9), np.linspace(0, 1, 7)], 0.3)
    rng = np.random.default_rng(4)
    w = rng.integers(0, 5, size=(*grid.shape, 2, 2)).astype(np.float64)
    mech = GaussianProcessMechanism(sigma=2.0, rkhs_sensitivity=math.sqrt(2.0))
    total = float(w.sum())
    a = mech.release_binned(w, grid, 11, total_mass=total)
    b = mech.release_binned(w.copy(), grid, 11, total_mass=total)
    assert np.array_equal(a, b)
    # the white noise is the exact discrete Gaussian on 2^-k·Z
    bits = mech.lattice_bits_for(grid, total)
    scale = mech.noise_scale_for(grid, total, 0.0, 4)
    lat = GaussianProcessMechanism._lattice_noise(scale, bits)
    assert lat.bits == bits and lat.variance >= scale**2 * 4.0**bits
    white = lat.sample((400, 9 * 7 * 4), 5) * 2.0**bits
    assert np.all(white == np.rint(white))
    # at σ′·2^k ≥ 2^24 the discrete Gaussian's binned law is the continuous one to ~1e-14
    sd = math.sqrt(lat.variance)
    u = stats.norm.cdf(white.ravel() / sd)
    assert stats.kstest(u, "uniform").pvalue > FAIL_PROB

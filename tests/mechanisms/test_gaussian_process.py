"""Gaussian-process mechanism on a Kronecker grid: exact draws, linear maps, privacy map."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfair import InvalidDataError, InvalidParameterError
from dpfair.mechanisms import analytic_gaussian_delta, analytic_gaussian_sigma
from dpfair.mechanisms.gaussian_process import (
    GaussianProcessMechanism,
    KroneckerGaussianGrid,
    gaussian_kernel_matrix,
)
from tests._stats import FAIL_PROB


def _dense_kernel(grid: KroneckerGaussianGrid) -> np.ndarray:
    nodes = grid.nodes()
    sq = ((nodes[:, None, :] - nodes[None, :, :]) ** 2).sum(-1)
    return np.exp(-sq / (2 * grid.length_scale**2))


def test_kernel_matrix_values():
    k = gaussian_kernel_matrix([0.0, 0.5], [0.0, 1.0], length_scale=0.5)
    np.testing.assert_allclose(k, [[1.0, math.exp(-2.0)], [math.exp(-0.5), math.exp(-0.5)]])


def test_grid_covariance_is_kronecker_of_1d_kernels():
    grid = KroneckerGaussianGrid.uniform(2, (5, 7), length_scale=0.3)
    dense = _dense_kernel(grid)
    np.testing.assert_allclose(np.kron(grid.kernels[0], grid.kernels[1]), dense, atol=1e-15)


def test_noise_covariance_dominates_kernel_and_is_full_rank():
    """Σ = ⊗ R_i R_iᵀ ⪰ ⊗ K_i: no direction is left without noise (no truncation)."""
    grid = KroneckerGaussianGrid.uniform(2, (9, 6), length_scale=0.2)
    factor = np.kron(grid.roots[0], grid.roots[1])
    sigma = factor @ factor.T
    k = _dense_kernel(grid)
    gap = np.linalg.eigvalsh(sigma - k)
    assert gap.min() >= -1e-12
    # (K1 + jI)⊗(K2 + jI) − K1⊗K2 = j(K1⊗I + I⊗K2) + j²I, and per node j·d + j²
    lmax = sum(np.linalg.eigvalsh(k).max() for k in grid.kernels)
    assert gap.max() <= grid.jitter * lmax + grid.jitter**2 + 1e-12
    assert np.diag(sigma - k).max() <= 2 * grid.jitter + grid.jitter**2 + 1e-12
    # every eigen-direction receives noise: smallest eigenvalue >= jitter^d (up to rounding)
    assert np.linalg.eigvalsh(sigma).min() >= 0.5 * grid.jitter**2


def test_sample_variance_matches_unit_kernel(seed):
    """Each node's draw is N(0, 1 + O(jitter)); chi-square bound at 1e-6 on 4000 draws.

    Detects a wrong scale: a standard deviation off by 10% fails with probability ~1.
    """
    grid = KroneckerGaussianGrid.uniform(2, 6, length_scale=0.25)
    draws = grid.sample(np.random.default_rng(seed), batch_shape=(4000,))
    node = draws[2, 3]
    ss = float(np.sum(node**2))
    lo, hi = stats.chi2.ppf([FAIL_PROB / 2, 1 - FAIL_PROB / 2], node.size)
    assert lo <= ss <= hi


def test_sample_correlation_matches_kernel(seed):
    """Empirical correlation of two nodes at distance h: Fisher-z bound at 1e-6."""
    grid = KroneckerGaussianGrid((np.array([0.0, 0.25, 0.5]),), length_scale=0.25)
    draws = grid.sample(np.random.default_rng(seed), batch_shape=(20000,))
    r = np.corrcoef(draws[0], draws[1])[0, 1]
    target = math.exp(-0.5)
    zcrit = stats.norm.isf(FAIL_PROB / 2)
    assert abs(np.arctanh(r) - np.arctanh(target)) <= zcrit / math.sqrt(20000 - 3)


def test_kernel_apply_equals_dense_product():
    grid = KroneckerGaussianGrid.uniform(3, (4, 5, 3), length_scale=0.4)
    v = np.random.default_rng(0).normal(size=grid.shape)
    dense = _dense_kernel(grid) @ v.reshape(-1)
    np.testing.assert_allclose(grid.kernel_apply(v).reshape(-1), dense, rtol=1e-12, atol=1e-12)


def test_interpolation_is_exact_for_multilinear_functions():
    grid = KroneckerGaussianGrid.uniform(2, (5, 4), length_scale=0.3)
    nodes = grid.nodes()
    f = lambda x: 1.0 + 2.0 * x[:, 0] - 3.0 * x[:, 1] + 4.0 * x[:, 0] * x[:, 1]  # noqa: E731
    vals = f(nodes).reshape(grid.shape)
    pts = np.random.default_rng(1).random((200, 2))
    np.testing.assert_allclose(grid.interpolate(vals, pts), f(pts), rtol=1e-12, atol=1e-12)


def test_linear_binning_is_adjoint_of_interpolation_and_keeps_mass():
    grid = KroneckerGaussianGrid.uniform(2, (6, 5), length_scale=0.3)
    rng = np.random.default_rng(2)
    pts = rng.random((300, 2))
    pts[0] = [1.0, 1.0]  # corner of the box
    w = rng.random(300)
    binned = grid.linear_binning(pts, w)
    assert binned.sum() == pytest.approx(w.sum(), rel=1e-13)
    assert np.all(binned >= 0)
    v = rng.normal(size=grid.shape)
    assert np.sum(binned * v) == pytest.approx(np.sum(w * grid.interpolate(v, pts)), rel=1e-12)


def test_points_outside_grid_are_rejected():
    grid = KroneckerGaussianGrid.uniform(1, 5, length_scale=0.3)
    with pytest.raises(InvalidDataError, match="outside the grid"):
        grid.interpolate(np.zeros(5), np.array([[1.2]]))


def test_projection_norm_bounds_rkhs_norm():
    """For f = Σ c_j k(·, s_j) off the grid: f_Tᵀ (K_T + jI)⁻¹ f_T ≤ ‖f‖²_H (proof step 1)."""
    grid = KroneckerGaussianGrid.uniform(2, 7, length_scale=0.2)
    rng = np.random.default_rng(3)
    for _ in range(20):
        s = rng.random((5, 2))
        c = rng.normal(size=5)
        ks = np.exp(-((s[:, None] - s[None]) ** 2).sum(-1) / (2 * 0.04))
        norm_sq = c @ ks @ c
        kts = np.exp(-((grid.nodes()[:, None] - s[None]) ** 2).sum(-1) / (2 * 0.04))
        f_t = kts @ c
        kt = _dense_kernel(grid) + grid.jitter * np.eye(grid.size)
        assert f_t @ np.linalg.solve(kt, f_t) <= norm_sq * (1 + 1e-9) + 1e-12


def test_rkhs_norm_sq_of_one_bump_is_one():
    grid = KroneckerGaussianGrid.uniform(2, 5, length_scale=0.3)
    c = np.zeros(grid.shape)
    c[2, 1] = 1.0
    assert grid.rkhs_norm_sq(c) == pytest.approx(1.0)


def test_privacy_map_equals_analytic_gaussian():
    mech = GaussianProcessMechanism.for_approx(0.8, 1e-7, math.sqrt(2))
    assert mech.sigma == pytest.approx(analytic_gaussian_sigma(0.8, 1e-7, math.sqrt(2)))
    assert analytic_gaussian_delta(mech.sigma, math.sqrt(2), 0.8) <= 1e-7
    assert mech.privacy_at(1e-7).epsilon == pytest.approx(0.8, rel=1e-6)
    assert mech.privacy.rho == pytest.approx(2 / (2 * mech.sigma**2), rel=1e-12)
    assert mech.mu == pytest.approx(math.sqrt(2) / mech.sigma, rel=1e-15)
    z = GaussianProcessMechanism.for_zcdp(0.3, 2.0)
    assert z.privacy.rho == pytest.approx(0.3, rel=1e-12)


def test_release_is_seeded_fresh_and_scaled():
    grid = KroneckerGaussianGrid.uniform(2, 6, length_scale=0.3)
    mech = GaussianProcessMechanism(sigma=3.0)
    base = np.ones((*grid.shape, 2))
    a = mech.release(base, grid, rng=np.random.default_rng(5))
    b = mech.release(base, grid, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(6)
    assert not np.array_equal(mech.release(base, grid, gen), mech.release(base, grid, gen))
    # noise = sigma * (exact GP draw with the same normals)
    noise = grid.sample(np.random.default_rng(5), batch_shape=(2,))
    np.testing.assert_allclose(a - base, 3.0 * noise, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs", [{"sigma": 0.0}, {"sigma": -1.0}, {"sigma": 1.0, "rkhs_sensitivity": 0.0}]
)
def test_bad_mechanism_parameters(kwargs):
    with pytest.raises(InvalidParameterError):
        GaussianProcessMechanism(**kwargs)


def test_bad_grid_parameters():
    with pytest.raises(InvalidParameterError):
        KroneckerGaussianGrid((np.array([0.0, 0.0, 1.0]),), length_scale=0.1)
    with pytest.raises(InvalidParameterError):
        KroneckerGaussianGrid((np.linspace(0, 1, 3),), length_scale=-1.0)
    with pytest.raises(InvalidParameterError):
        KroneckerGaussianGrid(np.linspace(0, 1, 3), length_scale=0.1)  # type: ignore[arg-type]
    grid = KroneckerGaussianGrid.uniform(1, 4, length_scale=0.2)
    with pytest.raises(InvalidParameterError):
        GaussianProcessMechanism(sigma=1.0).release(np.zeros(5), grid)

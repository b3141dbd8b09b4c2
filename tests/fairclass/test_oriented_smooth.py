"""The directional S1 post-smoother (``fairclass/_oriented.py``): exact against dense
matrices, ratio-preserving along level sets, post-processing only, and the direction it
picks on designs whose η is constant along a known direction."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass import _model as M
from dpfair.fairclass import _oriented as O
from dpfair.mechanisms import KroneckerGaussianGrid


def _grid(g: int = 12, h: float = 0.3) -> KroneckerGaussianGrid:
    return KroneckerGaussianGrid.uniform(2, g, length_scale=h)


def _dense(grid: KroneckerGaussianGrid, kernel: np.ndarray) -> np.ndarray:
    """Row-normalised dense smoother of a stationary kernel given on node offsets."""
    g0, g1 = grid.shape
    r = kernel.shape[0] // 2
    idx = np.array([(i, j) for i in range(g0) for j in range(g1)])
    d = idx[:, None, :] - idx[None, :, :] + r
    ok = np.all((d >= 0) & (d < kernel.shape[0]), axis=-1)
    k = np.where(ok, kernel[np.clip(d[..., 0], 0, 2 * r), np.clip(d[..., 1], 0, 2 * r)], 0.0)
    return k / k.sum(axis=1, keepdims=True)


def _sigma(grid: KroneckerGaussianGrid) -> np.ndarray:
    return np.kron(grid.roots[0] @ grid.roots[0].T, grid.roots[1] @ grid.roots[1].T)


def test_supports_only_equal_spaced_two_feature_grids() -> None:
    assert O.supports(_grid())
    assert not O.supports(KroneckerGaussianGrid.uniform(3, 5, length_scale=0.3))
    assert not O.supports(KroneckerGaussianGrid.uniform(1, 9, length_scale=0.3))
    assert not O.supports(KroneckerGaussianGrid(
        (np.array([0.0, 0.2, 1.0]), np.linspace(0, 1, 3)), length_scale=0.3))
    assert not O.supports(KroneckerGaussianGrid.uniform(2, (5, 9), length_scale=0.3))


def test_every_candidate_equals_its_dense_matrix() -> None:
    """FFT convolution / convolution of ones = S·Y, and the noise term = diag(SΣ)."""
    grid = _grid()
    rng = np.random.default_rng(3)
    Y = rng.normal(size=(*grid.shape, 2, 2))
    flat = Y.reshape(-1, 4)
    sigma = _sigma(grid)
    ones = np.ones((1, *grid.shape))
    cands = O._Candidates(grid, M.SMOOTH_LADDER)
    n_seen = 0
    for _label, kernel in cands:
        S = _dense(grid, kernel)
        conv = O._conv(np.concatenate([np.moveaxis(Y.reshape(*grid.shape, 4), -1, 0), ones]),
                       kernel)
        smoothed = np.moveaxis(conv[:4] / conv[4], 0, -1).reshape(-1, 4)
        np.testing.assert_allclose(smoothed, S @ flat, rtol=1e-9, atol=1e-9)
        diag = (O._conv(ones, cands.noise_kernel(kernel))[0] / conv[4]).ravel()
        np.testing.assert_allclose(diag, np.einsum("ij,ji->i", S, sigma), rtol=1e-6)
        n_seen += 1
    assert n_seen == O.N_DIRECTIONS * len(O.ALONG_LADDER) + sum(s > 0 for s in M.SMOOTH_LADDER)


def test_noise_factor_exact_and_subsampled() -> None:
    grid = _grid(g=16, h=0.25)
    sigma = _sigma(grid)
    kernel = O._Candidates(grid, ())._kernel(math.pi / 4, 2.0, O.ACROSS_WIDTH)
    S = _dense(grid, kernel)
    exact = math.sqrt(np.trace(S @ sigma @ S.T) / np.trace(sigma))
    assert O._noise_factor(grid, kernel) == pytest.approx(exact, rel=1e-9)
    # a regular subgrid of 6 x 6 nodes: an approximation, within a few per cent
    assert O._noise_factor(grid, kernel, max_entries=(6 * 16) ** 2) == pytest.approx(
        exact, rel=0.05)
    assert O._noise_factor(grid, None) == 1.0
    assert 0.0 < exact < 1.0


def test_along_a_level_set_the_ratio_is_kept_where_the_density_varies() -> None:
    """η depends on x₁ only, the density on x₀ only: smoothing G and H along axis 0 (θ = 0)
    with a vanishing across-width returns η exactly, though G and H change."""
    grid = _grid(g=20, h=0.2)
    x0, x1 = np.meshgrid(*grid.axes, indexing="ij")
    eta = 1.0 / (1.0 + np.exp(-6.0 * (x1 - 0.5)))
    dens = 0.2 + 3.0 * x0**2
    sums = np.stack([(1 - eta) * dens, eta * dens], axis=-1)  # [.., y]
    kernel = O._Candidates(grid, ())._kernel(0.0, 3.0, 1e-6)
    conv = O._conv(np.concatenate([np.moveaxis(sums, -1, 0), np.ones((1, *grid.shape))]),
                   kernel)
    smooth = np.moveaxis(conv[:2] / conv[2], 0, -1)
    assert np.max(np.abs(smooth - sums)) > 0.05
    np.testing.assert_allclose(smooth[..., 1] / smooth.sum(-1), eta, rtol=1e-10)


def test_three_feature_grids_keep_the_shipped_smoother() -> None:
    grid = KroneckerGaussianGrid.uniform(3, 6, length_scale=0.3)
    Y = np.random.default_rng(1).normal(size=(*grid.shape, 2, 2))
    a, fa = M.smooth_release(grid, Y, 0.7)
    b, _w, fb = M.sure_smooth(grid, Y, 0.7)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fa, fb)


def test_no_noise_no_smoothing() -> None:
    grid = _grid()
    Y = np.random.default_rng(2).normal(size=(*grid.shape, 2, 2))
    out, factor = M.smooth_release(grid, Y, 0.0)
    np.testing.assert_array_equal(out, Y)
    np.testing.assert_array_equal(factor, np.ones(2))


def _captured_release(X, y, A, seed):
    cap = []
    orig = M.smooth_release

    def hook(grid, noisy, sd):
        cap.append((grid, noisy.copy(), sd))
        return orig(grid, noisy, sd)

    M.smooth_release = hook
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = CDPFairClassifier(epsilon=1.0, delta=1e-7, alpha=0.1, random_state=seed,
                                    feature_bounds=[(0.0, 1.0)] * 2).fit(
                X, y, sensitive_features=A)
    finally:
        M.smooth_release = orig
    return clf, cap[0]


@pytest.mark.parametrize("direction", [0, 1, 2])
def test_picks_the_level_set_direction(direction: int) -> None:
    """η depends on x₀ (level sets along θ = 90°), on x₁ (θ = 0°) or on x₀ + x₁ (θ = 135°);
    a smooth η, N = 6000, ε = 1. Over 5 fixed seeds × 2 groups, no group is smoothed along a
    direction more than 22.5° off its level sets (the alternative is the equal-width family),
    and at least half of them are smoothed along the level sets (deterministic per seed)."""
    target = {0: 90.0, 1: 0.0, 2: 135.0}[direction]
    along = 0
    for seed in range(5):
        rng = np.random.default_rng(100 * direction + seed)
        n = 6000
        X = rng.uniform(size=(n, 2))
        A = (rng.uniform(size=n) < 0.5).astype(np.int8)
        lin = {0: X[:, 0] - 0.5, 1: X[:, 1] - 0.5, 2: X[:, 0] + X[:, 1] - 1.0}[direction]
        eta = 1.0 / (1.0 + np.exp(-(4.0 * lin + 1.5 * (2 * A - 1))))
        y = (rng.uniform(size=n) < eta).astype(np.int8)
        _clf, (grid, noisy, sd) = _captured_release(X, y, A, seed)
        pilot, _w, pf = M.sure_smooth(grid, noisy, sd)
        _out, chosen, _f = O.oriented_smooth(
            grid, noisy, sd, pilot=pilot, pilot_factor=pf, ridge=M.RIDGE * sd,
            pilot_widths=M.SMOOTH_LADDER)
        for theta, _along, _across in chosen:
            if theta < 0:  # the equal-width family
                continue
            off = min(abs(theta - target), 180.0 - abs(theta - target))
            assert off <= 22.5 + 1e-9, (seed, chosen)
            along += 1
    assert along >= 5


def test_prediction_is_post_processing() -> None:
    """Predicting twice gives the same labels and reads no training data (smoothing happens
    once, at fit time, on the released sums)."""
    rng = np.random.default_rng(5)
    n = 3000
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-4 * (X[:, 0] - 0.5)))).astype(np.int8)
    clf, _cap = _captured_release(X, y, A, 0)
    Xt = rng.uniform(size=(500, 2))
    At = (rng.uniform(size=500) < 0.4).astype(np.int8)
    first = clf.predict(Xt, sensitive_features=At)
    X[:] = np.nan  # the training rows are gone
    np.testing.assert_array_equal(first, clf.predict(Xt, sensitive_features=At))


def _dense_reference(grid, noisy, sd):
    """The whole selection with dense n × n smoothers (the measured reference)."""
    n = int(np.prod(grid.shape))
    Y = noisy.reshape(n, 2, 2)
    sigma = _sigma(grid)
    L = np.kron(grid.roots[0], grid.roots[1])
    pilot, _w, pf = M.sure_smooth(grid, noisy, sd)
    lam = M.RIDGE * sd
    P = pilot.reshape(n, 2, 2)
    dens = np.maximum(P.sum(-1), 0.0)
    eta_p = M.eta_from_sums(P, lam * pf)
    c = (1 - eta_p) ** 2 + eta_p**2
    eta0 = M.eta_from_sums(Y, lam)
    mats = [np.eye(n)] + [_dense(grid, k) for _l, k in O._Candidates(grid, M.SMOOTH_LADDER)]
    best, pick = np.full(2, np.inf), [0, 0]
    for i, S in enumerate(mats):
        eta_s = M.eta_from_sums(np.einsum("ij,jay->iay", S, Y), lam * pf)
        diag = np.einsum("ij,ji->i", S, sigma)
        crit = np.sum(dens * ((eta_s - eta0) ** 2
                              + 2 * sd**2 * c * diag[:, None] / (dens + lam) ** 2), axis=0)
        for a in np.flatnonzero(crit < best):
            best[a], pick[a] = crit[a], i
    out = np.stack([np.einsum("ij,jy->iy", mats[pick[a]], Y[:, a]) for a in (0, 1)], axis=1)
    factor = [math.sqrt(np.sum((mats[k] @ L) ** 2) / np.sum(L * L)) for k in pick]
    return out.reshape(noisy.shape), np.array(factor)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_equals_the_dense_reference(seed: int) -> None:
    """Sums of a smooth η plus noise of the release's law (σ′ large and small): the FFT
    implementation picks the dense reference's smoother and returns its output, cold or
    from the grid cache."""
    grid = _grid(g=14, h=0.28)
    x0, x1 = np.meshgrid(*grid.axes, indexing="ij")
    rng = np.random.default_rng(seed)
    eta = 1.0 / (1.0 + np.exp(-5.0 * (x0 + x1 - 1.0)))
    dens = 40.0 * (0.5 + x0)
    F = np.stack([np.stack([(1 - eta) * dens, eta * dens], -1)] * 2, axis=-2)
    sd = [2.0, 8.0, 20.0][seed]
    L = np.kron(grid.roots[0], grid.roots[1])
    noise = (L @ rng.normal(size=(L.shape[1], 4))).reshape(F.shape) * sd
    noisy = F + noise
    ref_out, ref_factor = _dense_reference(grid, noisy, sd)
    O._CACHE.clear()
    for _ in range(2):  # cold, then cached
        pilot, _w, pf = M.sure_smooth(grid, noisy, sd)
        out, _chosen, factor = O.oriented_smooth(
            grid, noisy, sd, pilot=pilot, pilot_factor=pf, ridge=M.RIDGE * sd,
            pilot_widths=M.SMOOTH_LADDER)
        np.testing.assert_allclose(out, ref_out, rtol=1e-8, atol=1e-8 * np.abs(F).max())
        np.testing.assert_allclose(factor, ref_factor, rtol=1e-9)

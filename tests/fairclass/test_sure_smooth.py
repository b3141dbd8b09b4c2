"""S1's post-smoothing of the released kernel sums (``_model.sure_smooth``).

The smoother is a post-processing of the release: it reads the released sums, the public
grid and the public noise scale only. These tests check what it chooses (no noise: no
smoothing; a flat signal under heavy noise: the widest), that Stein's estimate it
minimises is unbiased for the squared error, and that ``release_s1_from_weights`` is
exactly "release, then smooth, then the ratio" (no other use of the data).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfair.fairclass._model import (
    SMOOTH_LADDER,
    _apply_axes,
    _lattice_noise,
    _smoother,
    eta_from_sums,
    kernel_cell_weights,
    make_grid,
    release_s1_from_weights,
    smooth_release,
    sure_smooth,
)
from dpfair.mechanisms import GaussianProcessMechanism


def _grid():
    return make_grid(2, 0.15, resolution=3.0)


def _signal(grid, wiggle: float) -> np.ndarray:
    x, y = np.meshgrid(*grid.axes, indexing="ij")
    base = 40.0 + wiggle * np.sin(6 * np.pi * x) * np.cos(5 * np.pi * y)
    return np.stack([np.stack([base, 0.5 * base], -1)] * 2, axis=-2)  # [.., a, y]


def test_no_noise_keeps_the_release() -> None:
    grid = _grid()
    F = _signal(grid, 10.0)
    out, widths, left = sure_smooth(grid, F, 0.0)
    assert np.array_equal(widths, [0.0, 0.0])
    assert np.array_equal(out, F)
    assert np.array_equal(left, [1.0, 1.0])


def test_flat_signal_under_heavy_noise_gets_the_widest_smoother() -> None:
    grid = _grid()
    F = np.full((*grid.shape, 2, 2), 30.0)
    noise = grid.sample(np.random.default_rng(3), batch_shape=(2, 2))
    _out, widths, left = sure_smooth(grid, F + 20.0 * noise, 20.0)
    assert np.array_equal(widths, [max(SMOOTH_LADDER)] * 2)
    assert np.all((left > 0) & (left < 0.5))


def test_stein_estimate_is_unbiased_for_the_squared_error() -> None:
    """Mean over draws of ‖SY − Y‖² + 2σ²tr(SΣ) − σ²tr(Σ) equals the mean of ‖SY − F‖².

    Both sides are averages of the same 400 draws; their difference has mean 0 and its
    sample sd is estimated from the draws: |mean| ≤ 6 standard errors fails with
    probability < 1e-6 under a normal approximation (400 i.i.d. terms, finite moments).
    """
    grid = _grid()
    F = _signal(grid, 15.0)[..., 0, 0]
    sd = 5.0
    mats = tuple(_smoother(ax, 0.75 * grid.length_scale) for ax in grid.axes)
    covs = [r @ r.T for r in grid.roots]
    tr_s = float(np.prod([np.sum(m * c.T) for m, c in zip(mats, covs, strict=True)]))
    tr_1 = float(np.prod([np.trace(c) for c in covs]))
    rng = np.random.default_rng(11)
    diffs = []
    for _ in range(400):
        Y = F + sd * grid.sample(rng)
        SY = _apply_axes(mats, Y)
        est = np.sum((SY - Y) ** 2) + 2 * sd**2 * tr_s - sd**2 * tr_1
        diffs.append(est - np.sum((SY - F) ** 2))
    d = np.asarray(diffs)
    assert abs(d.mean()) <= 6.0 * d.std(ddof=1) / np.sqrt(d.size)


def test_chosen_smoothing_lowers_the_error_on_average() -> None:
    grid = _grid()
    F = _signal(grid, 3.0)
    rng = np.random.default_rng(5)
    raw, smooth = [], []
    for _ in range(50):
        Y = F + 8.0 * grid.sample(rng, batch_shape=(2, 2))
        out, _w, _left = sure_smooth(grid, Y, 8.0)
        raw.append(np.sum((Y - F) ** 2))
        smooth.append(np.sum((out - F) ** 2))
    assert np.mean(smooth) < 0.5 * np.mean(raw)


@pytest.mark.parametrize("seed", [0, 1])
def test_release_is_release_then_smooth_then_ratio(seed: int) -> None:
    """The data enter S1 only through the Gaussian-process release (and the count)."""
    rng = np.random.default_rng(seed)
    U = rng.uniform(size=(400, 2))
    A = (rng.uniform(size=400) < 0.4).astype(np.int8)
    y = (rng.uniform(size=400) < 0.5).astype(np.int8)
    grid = _grid()
    W = kernel_cell_weights(grid, U, A, y)
    mech = GaussianProcessMechanism(sigma=6.0, rkhs_sensitivity=np.sqrt(2.0))
    eta, _pi = release_s1_from_weights(grid, W, n=400, n1=int(A.sum()), sigma_count=20.0,
                                       mechanism=mech, rng=np.random.default_rng(99))
    again = np.random.default_rng(99)
    _lattice_noise(400, 20.0, again)  # the count's draw comes first
    noisy = mech.release_binned(W, grid, again, total_mass=400.0)
    smoothed, left = smooth_release(grid, noisy, mech.noise_scale_for(grid, 400.0))
    assert np.array_equal(eta, eta_from_sums(smoothed, mech.sigma * left))

"""S1 post-smoothing along a direction, on two-feature grids (post-processing of S1).

The released cell sums G = F̃_{a,1} and H = F̃_{a,0} of one group are smoothed by the same
row-normalised anisotropic Gaussian: width ``along``·h in a direction θ and ``across``·h
across it. Where η_a is constant along θ, the smoothed ratio SG/(SG + SH) is a weighted mean
of η_a over a level set, so it keeps η_a even where the density varies along θ, and the
noise shrinks by the number of nodes averaged. Smoothing G and H as densities (the criterion
of :func:`dpfair.fairclass._model.sure_smooth`) cannot see this: their level sets are not η's.

Per group, the direction, the along-width and the shipped family's equal widths are compared
by a linearised Stein estimate of the density-weighted squared error of η̃:

    R̂(S) = Σ_i D_i [ (η_S,i − η_0,i)² + 2σ′² c_i (SΣ)_ii / (D_i + λ)² ],

with η_0 the ratio of the unsmoothed release, D and c_i = η_i² + (1 − η_i)² from the pilot
(the shipped smoother's output), Σ the release's noise covariance and λ the ratio's ridge.
The linearisation of η̃ in the noise makes the cross term 2σ′²c_i(SΣ)_ii/(D_i+λ)² (Stein's
identity for the Gaussian release). ``across`` is fixed at a quarter of h (about one grid
spacing): the estimate targets η at bandwidth h and does not see the bias η_h already has
across a steep boundary, so it is not asked to choose that width (measured in
``docs/fairclass_certified.md``, "Issue 20, ninth pass").

Privacy: everything here reads the released sums, the public grid, the public noise scale
and public constants only, so it is post-processing of S1; the guarantee is unchanged.
Speed: every candidate is a few FFT convolutions on the uniform grid (the kernel is
stationary; row normalisation divides by the convolution of ones), no n × n matrix.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray
from scipy.signal import fftconvolve

from dpfair.mechanisms import KroneckerGaussianGrid

__all__ = ["ACROSS_WIDTH", "ALONG_LADDER", "N_DIRECTIONS", "oriented_smooth", "supports"]

#: Public along-widths s/h of the directional candidates.
ALONG_LADDER = (1.0, 1.5, 2.0, 3.0)
#: Public across-width s/h (fixed, see the module docstring).
ACROSS_WIDTH = 0.25
#: Number of public directions θ = kπ/N_DIRECTIONS, k = 0, …, N − 1.
N_DIRECTIONS = 8
#: Kernels are cut where they fall below exp(−TRUNCATE²/2) (relative error < 1e-5).
TRUNCATE = 5.0


def _spacing(axis: NDArray[np.float64]) -> float | None:
    step = np.diff(axis)
    if step.size == 0 or not np.allclose(step, step[0], rtol=1e-9, atol=0.0):
        return None
    return float(step[0])


def supports(grid: KroneckerGaussianGrid) -> bool:
    """True for two-feature grids with one equal spacing on both axes."""
    if grid.ndim != 2:
        return False
    s0, s1 = _spacing(grid.axes[0]), _spacing(grid.axes[1])
    return s0 is not None and s1 is not None and math.isclose(s0, s1, rel_tol=1e-9)


def _offsets(radius: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r = np.arange(-radius, radius + 1, dtype=np.float64)
    return np.meshgrid(r, r, indexing="ij")


def _conv(images: NDArray[np.float64], kernel: NDArray[np.float64]) -> NDArray[np.float64]:
    """Zero-padded 'same' convolution of each image (leading axis) with a symmetric kernel."""
    return np.asarray(fftconvolve(images, kernel[None], mode="same", axes=(1, 2)))


class _Candidates:
    """The public smoothers of one grid: kernels on node offsets and their noise terms."""

    def __init__(self, grid: KroneckerGaussianGrid, pilot_widths: tuple[float, ...]) -> None:
        self.shape = grid.shape
        self.step = float(grid.axes[0][1] - grid.axes[0][0])
        self.h = float(grid.length_scale)
        self.jitter = float(grid.jitter)
        self.pilot_widths = pilot_widths

    def _kernel(self, theta: float | None, along: float, across: float
                ) -> NDArray[np.float64]:
        g = max(self.shape)
        width = max(along, across) * self.h / self.step
        radius = int(min(g - 1, math.ceil(TRUNCATE * width)))
        d0, d1 = _offsets(radius)
        if theta is None:  # the shipped family: one width on both axes
            q = (d0**2 + d1**2) / (along * self.h / self.step) ** 2
        else:
            u = d0 * math.cos(theta) + d1 * math.sin(theta)
            v = -d0 * math.sin(theta) + d1 * math.cos(theta)
            q = (u / (along * self.h / self.step)) ** 2 + (v / (across * self.h / self.step)) ** 2
        return np.exp(-0.5 * q)

    def noise_kernel(self, kernel: NDArray[np.float64]) -> NDArray[np.float64]:
        """Kernel × the release's noise covariance on the same offsets (Σ is stationary)."""
        radius = kernel.shape[0] // 2
        d0, d1 = _offsets(radius)
        k0 = np.exp(-0.5 * (d0 * self.step / self.h) ** 2) + self.jitter * (d0 == 0)
        k1 = np.exp(-0.5 * (d1 * self.step / self.h) ** 2) + self.jitter * (d1 == 0)
        return kernel * k0 * k1

    def __iter__(self) -> Iterator[tuple[tuple[str | float, float, float], NDArray[np.float64]]]:
        for s in self.pilot_widths:
            if s > 0:
                yield ("equal", s, s), self._kernel(None, s, s)
        for k in range(N_DIRECTIONS):
            theta = math.pi * k / N_DIRECTIONS
            for along in ALONG_LADDER:
                yield (math.degrees(theta), along, ACROSS_WIDTH), self._kernel(
                    theta, along, ACROSS_WIDTH)


def _noise_factor(grid: KroneckerGaussianGrid, kernel: NDArray[np.float64] | None,
                  max_entries: int = 4_000_000) -> float:
    """sqrt(tr(S Σ Sᵀ)/tr(Σ)) for the row-normalised S of ``kernel`` (Σ = ⊗ R_iR_iᵀ).

    Exact while (nodes)² ≤ ``max_entries`` (up to 44 nodes per axis); above, the mean of the
    quadratic forms v_iᵀΣv_i over a regular subgrid of nodes i (it only scales the ratio's
    ridge, a public regulariser).
    """
    if kernel is None:
        return 1.0
    max_rows = max(2, int(math.isqrt(max_entries) // max(grid.shape)))
    c0 = grid.roots[0] @ grid.roots[0].T
    c1 = grid.roots[1] @ grid.roots[1].T
    g0, g1 = grid.shape
    rows0 = np.unique(np.linspace(0, g0 - 1, min(g0, max_rows)).round().astype(int))
    rows1 = np.unique(np.linspace(0, g1 - 1, min(g1, max_rows)).round().astype(int))
    radius = kernel.shape[0] // 2
    i0 = np.arange(g0)[None, :] - rows0[:, None] + radius  # (r0, g0) offsets into kernel
    i1 = np.arange(g1)[None, :] - rows1[:, None] + radius
    ok0 = (i0 >= 0) & (i0 < kernel.shape[0])
    ok1 = (i1 >= 0) & (i1 < kernel.shape[1])
    i0c = np.clip(i0, 0, kernel.shape[0] - 1)
    i1c = np.clip(i1, 0, kernel.shape[1] - 1)
    # V[a, b, j, l] = K(row a − j, row b − l) on the grid, normalised per (a, b)
    V = kernel[i0c[:, None, :, None], i1c[None, :, None, :]]
    V = V * (ok0[:, None, :, None] & ok1[None, :, None, :])
    V = V / V.sum(axis=(2, 3), keepdims=True)
    CV = np.einsum("jk,abkl,ml->abjm", c0, V, c1, optimize=True)
    quad = np.einsum("abjl,abjl->ab", V, CV)
    trace_mean = float(np.trace(c0) * np.trace(c1)) / (g0 * g1)
    return math.sqrt(float(np.mean(quad)) / trace_mean)


def oriented_smooth(
    grid: KroneckerGaussianGrid,
    noisy: NDArray[np.float64],
    noise_sd: float,
    *,
    pilot: NDArray[np.float64],
    pilot_factor: NDArray[np.float64],
    ridge: float,
    pilot_widths: tuple[float, ...],
) -> tuple[NDArray[np.float64], list[tuple[float, float, float]], NDArray[np.float64]]:
    """Per group, the directional or equal-width smoother of least estimated η error.

    Parameters
    ----------
    grid : KroneckerGaussianGrid
        A two-feature grid with equal spacing (:func:`supports`).
    noisy : ndarray of shape ``grid.shape + (2, 2)``
        The released cell sums [a, y].
    noise_sd : float
        The release's public noise scale σ′ (covariance σ′²·⊗R_iR_iᵀ).
    pilot, pilot_factor : ndarray
        The shipped smoother's output and noise factors (:func:`~._model.sure_smooth`):
        the density D, the weights c and the ridge of the criterion are read off it.
    ridge : float
        λ before the noise factor (``RIDGE · σ′`` in the criterion).
    pilot_widths : tuple of float
        The shipped family's public ladder (its non-zero widths are candidates; width 0,
        the unsmoothed release, is one too).

    Returns
    -------
    smoothed : ndarray, same shape as ``noisy``
    chosen : list of (θ in degrees or -1 for the equal family / 0 for none, along, across)
    noise_factor : ndarray of shape (2,)
    """
    from dpfair.fairclass._model import eta_from_sums  # one module, no import cycle

    var = float(noise_sd) ** 2
    Y = np.moveaxis(np.asarray(noisy, dtype=np.float64).reshape(*grid.shape, 4), -1, 0)
    ones = np.ones((1, *grid.shape))
    dens = np.maximum(pilot.sum(axis=-1), 0.0)  # grid + (2,)
    eta_pilot = eta_from_sums(pilot, ridge * pilot_factor)
    weight_c = (1.0 - eta_pilot) ** 2 + eta_pilot**2
    lam = ridge * pilot_factor
    eta0 = eta_from_sums(noisy, ridge)
    noise_diag0 = float((1.0 + grid.jitter) ** 2)  # (Σ)_ii / σ′² for S = I

    def criterion(smoothed: NDArray[np.float64], diag: NDArray[np.float64]) -> NDArray[np.float64]:
        eta_s = eta_from_sums(smoothed, lam)
        term = (eta_s - eta0) ** 2 + 2.0 * var * weight_c * diag[..., None] / (dens + ridge) ** 2
        return np.sum(dens * term, axis=(0, 1))

    best = criterion(np.asarray(noisy, dtype=np.float64), np.full(grid.shape, noise_diag0))
    out = np.array(noisy, dtype=np.float64, copy=True)
    chosen: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]
    kernels: list[NDArray[np.float64] | None] = [None, None]
    cands = _Candidates(grid, pilot_widths)
    for label, kernel in cands:
        conv = _conv(np.concatenate([Y, ones]), kernel)
        norm = conv[4]
        smoothed = np.moveaxis(conv[:4] / norm, 0, -1).reshape(noisy.shape)
        diag = _conv(ones, cands.noise_kernel(kernel))[0] / norm
        crit = criterion(smoothed, diag)
        for a in np.flatnonzero(crit < best):
            best[a] = crit[a]
            out[..., a, :] = smoothed[..., a, :]
            theta = -1.0 if label[0] == "equal" else float(label[0])
            chosen[a] = (theta, float(label[1]), float(label[2]))
            kernels[a] = kernel
    factor = np.array([_noise_factor(grid, kernels[a]) for a in (0, 1)])
    return out, chosen, factor

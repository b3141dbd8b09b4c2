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
from scipy import fft as sfft

from dpfair.fairclass._ratio import eta_from_sums
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
    """Zero-padded 'same' convolution of each image (leading axis) with a centred kernel."""
    g0, g1 = images.shape[1:]
    r0, r1 = kernel.shape[0] // 2, kernel.shape[1] // 2
    shape = (sfft.next_fast_len(g0 + 2 * r0, real=True),
             sfft.next_fast_len(g1 + 2 * r1, real=True))
    full = sfft.irfft2(sfft.rfft2(images, s=shape, axes=(1, 2))
                       * sfft.rfft2(kernel, s=shape)[None], s=shape, axes=(1, 2))
    return np.asarray(full[:, r0:r0 + g0, r1:r1 + g1])


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


class _Prepared:
    """The data-free part of every candidate on one public grid, computed once and cached.

    Per candidate: the kernel's real FFT on a zero-padded shape (no wrap-around), the row
    normaliser (convolution of ones), the noise term diag(SΣ)/σ′² and, on first use, the
    noise factor. Grids of equal axes, h and jitter share one entry (they are the same
    public object), so refits and folds pay the set-up once.
    """

    def __init__(self, grid: KroneckerGaussianGrid, pilot_widths: tuple[float, ...]) -> None:
        self.grid = grid
        cands = _Candidates(grid, pilot_widths)
        items = list(cands)
        self.radius = max(k.shape[0] // 2 for _l, k in items)
        self.fft_shape = tuple(sfft.next_fast_len(g + 2 * self.radius, real=True)
                               for g in grid.shape)
        ones = np.ones((1, *grid.shape))
        self.labels: list[tuple[float, float, float]] = []
        self.kernels: list[NDArray[np.float64]] = []
        self.kernel_hats: list[NDArray[np.complex128]] = []
        self.norms: list[NDArray[np.float64]] = []
        self.diags: list[NDArray[np.float64]] = []
        for label, kernel in items:
            theta = -1.0 if label[0] == "equal" else float(label[0])
            self.labels.append((theta, float(label[1]), float(label[2])))
            self.kernels.append(kernel)
            self.kernel_hats.append(self._kernel_hat(kernel))
            norm = _conv(ones, kernel)[0]
            self.norms.append(norm)
            self.diags.append(_conv(ones, cands.noise_kernel(kernel))[0] / norm)
        self._factors: dict[int, float] = {}

    def _kernel_hat(self, kernel: NDArray[np.float64]) -> NDArray[np.complex128]:
        pad = np.zeros((2 * self.radius + 1,) * 2)
        r = kernel.shape[0] // 2
        pad[self.radius - r:self.radius + r + 1, self.radius - r:self.radius + r + 1] = kernel
        return np.asarray(sfft.rfft2(pad, s=self.fft_shape))

    def transform(self, images: NDArray[np.float64]) -> NDArray[np.complex128]:
        """Real FFT of each image (leading axis) on the padded shape."""
        return np.asarray(sfft.rfft2(images, s=self.fft_shape, axes=(1, 2)))

    def smooth(self, images_hat: NDArray[np.complex128], k: int) -> NDArray[np.float64]:
        """Candidate k applied to the transformed images: S·Y on the grid."""
        full = sfft.irfft2(images_hat * self.kernel_hats[k][None], s=self.fft_shape,
                           axes=(1, 2))
        g0, g1 = self.grid.shape
        r = self.radius
        return np.asarray(full[:, r:r + g0, r:r + g1] / self.norms[k][None])

    def factor(self, k: int) -> float:
        if k not in self._factors:
            self._factors[k] = _noise_factor(self.grid, self.kernels[k])
        return self._factors[k]


def _prepared(grid: KroneckerGaussianGrid, pilot_widths: tuple[float, ...]) -> _Prepared:
    key = (grid.axes[0].tobytes(), grid.axes[1].tobytes(), float(grid.length_scale),
           float(grid.jitter), tuple(float(w) for w in pilot_widths))
    return _cached(key, grid)


#: At most 8 public grids' candidates are kept (oldest dropped first).
_CACHE: dict[tuple[bytes, bytes, float, float, tuple[float, ...]], _Prepared] = {}


def _cached(key: tuple[bytes, bytes, float, float, tuple[float, ...]],
            grid: KroneckerGaussianGrid) -> _Prepared:
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        hit = _CACHE[key] = _Prepared(grid, key[4])
    return hit


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
    chosen : list of (θ in degrees, or −1 for the equal-width family, or 0 with widths 0
        for none; along; across), per group
    noise_factor : ndarray of shape (2,)
    """
    var = float(noise_sd) ** 2
    noisy = np.asarray(noisy, dtype=np.float64)
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

    best = criterion(noisy, np.full(grid.shape, noise_diag0))
    out = np.array(noisy, copy=True)
    chosen: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]
    picked: list[int | None] = [None, None]
    prep = _prepared(grid, pilot_widths)
    images_hat = prep.transform(np.moveaxis(noisy.reshape(*grid.shape, 4), -1, 0))
    for k, label in enumerate(prep.labels):
        smoothed = np.moveaxis(prep.smooth(images_hat, k), 0, -1).reshape(noisy.shape)
        crit = criterion(smoothed, prep.diags[k])
        for a in np.flatnonzero(crit < best):
            best[a] = crit[a]
            out[..., a, :] = smoothed[..., a, :]
            chosen[a] = label
            picked[a] = k
    factor = np.array([1.0 if k is None else prep.factor(k) for k in picked])
    return out, chosen, factor

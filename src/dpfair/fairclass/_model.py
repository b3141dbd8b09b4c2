"""Step S1 and the released model: kernel sums on a public grid, η̃, π̃, and one fitted fold.

Features are first mapped to the unit box [0, 1]^d with the *public* feature bounds. The
kernel is k(x, x') = exp(−|x − x'|²/(2h²)) (sup k = 1; the paper's C_K = 1). For each
(group a, label y) cell the released function is the binned kernel sum

    F_{a,y}(t) = Σ_{i: A_i = a, Y_i = y} Σ_j w_j(X_i) k(t, t_j),    t on the grid,

where w_j(X_i) ≥ 0, Σ_j w_j = 1 are the multilinear (linear-binning) weights of X_i on the
2^d surrounding grid nodes. Then

    η̂_a = F_{a,1} / (F_{a,1} + F_{a,0})

is the kernel regression estimate of P(Y = 1 | X, A = a) (the normalisations 1/(n_a h^d) of
the paper's p̂_a and ĝ_a cancel in the ratio, so no private group size is needed for η̂).
With privacy, the four F's carry Gaussian-process noise σ_f·W; they are then smoothed
further by a width chosen from the released values themselves (:func:`sure_smooth`, Stein's
unbiased risk estimate with the public noise law) and the ratio is regularised
(:func:`eta_from_sums`): both are post-processing of the release.

A fitted fold is the finite object (η̃ on the grid, π̃, τ̂); prediction interpolates η̃
multilinearly and thresholds the score Z — no data, no new noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.fairclass import _oriented
from dpfair.fairclass._ratio import eta_from_sums
from dpfair.fairclass._rule import PlugInRule
from dpfair.mechanisms import GaussianProcessMechanism, KroneckerGaussianGrid, LatticeNoise

__all__ = [
    "ReleasedFold",
    "bandwidth_rule",
    "eta_from_sums",
    "kernel_cell_sums",
    "kernel_cell_weights",
    "make_grid",
    "release_s1",
    "release_s1_from_weights",
    "row_uniforms",
    "smooth_release",
    "sure_smooth",
]

#: Constants of the public bandwidth rule (:func:`bandwidth_rule`), set on the paper's
#: *simulated* design only (no real data was looked at).
RULE_C_SAMPLING = 0.33
RULE_C_PRIVACY = 0.55
#: Ratio regulariser λ = RIDGE · σ_f · (the post-smoothing's noise factor, :func:`sure_smooth`).
RIDGE = 1.0
#: Public ladder of post-smoothing widths s/h that :func:`sure_smooth` chooses from (0: none).
SMOOTH_LADDER = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def bandwidth_rule(n: int, d: int, mu: float | None) -> float:
    """The public default bandwidth in unit-box units.

    h = max(c_s · n^{−1/(d+4)}, c_p · (n·μ_f)^{−1/(d+2)}), clipped to [0.02, 0.5].

    The first term is the usual bias–variance rate of a kernel estimate (bias ∝ h²,
    sampling sd ∝ (n h^d)^{−1/2}); the second balances the bias with the privacy noise of
    the kernel sums, whose size relative to the signal is ∝ 1/(μ_f n h^d) for
    Gaussian-process noise of Gaussian-DP level μ_f. Both n (the public size of the
    training half) and μ_f (from ε, δ) are public, so the rule spends no privacy. The
    constants c_s = 0.33 and c_p = 0.55 were set on the paper's simulation design (synthetic
    data only). ``mu=None`` means no privacy noise.
    """
    if n < 1 or d < 1:
        raise InvalidParameterError("bandwidth_rule: n and d must be >= 1.")
    h = RULE_C_SAMPLING * n ** (-1.0 / (d + 4))
    if mu is not None:
        h = max(h, RULE_C_PRIVACY * (n * mu) ** (-1.0 / (d + 2)))
    return float(min(max(h, 0.02), 0.5))


def make_grid(
    d: int, h: float, *, resolution: float = 4.0, max_nodes: int = 2**18
) -> KroneckerGaussianGrid:
    """Public grid on [0, 1]^d with spacing ≤ h/resolution (coarser if over ``max_nodes``).

    The grid depends only on (d, h, resolution, max_nodes): public quantities.
    """
    if resolution <= 0 or not math.isfinite(resolution):
        raise InvalidParameterError(f"grid_resolution={resolution!r}: must be > 0.")
    g = math.ceil(resolution / h) + 1
    cap = math.floor(max_nodes ** (1.0 / d) + 1e-9)
    if cap < 2:
        raise InvalidParameterError(
            f"max_grid_nodes={max_nodes!r}: too small for {d} features (need >= 2**d)."
        )
    g = max(min(g, cap), 2)
    return KroneckerGaussianGrid.uniform(d, g, length_scale=h)


def kernel_cell_weights(
    grid: KroneckerGaussianGrid,
    U: NDArray[np.float64],
    A: NDArray[np.int8],
    y: NDArray[np.int8],
) -> NDArray[np.float64]:
    """Exact linear-binning weights W_{a,y} of the four cells; shape ``grid.shape + (2, 2)``.

    Integer binning (:meth:`KroneckerGaussianGrid.exact_binning`) with q bits chosen from
    the public number of rows, divided by 2^{q·d}: every row adds a non-negative unit mass
    exactly, with no summation rounding, which the robust release
    (:meth:`GaussianProcessMechanism.release_binned`) relies on.
    """
    bits = grid.binning_bits(U.shape[0], grid.ndim)
    scale = float(1 << bits) ** grid.ndim
    binned = np.empty((*grid.shape, 2, 2), dtype=np.float64)
    for a in (0, 1):
        for yy in (0, 1):
            mask = (A == a) & (y == yy)
            binned[..., a, yy] = grid.exact_binning(U[mask], bits) / scale
    return binned


def kernel_cell_sums(
    grid: KroneckerGaussianGrid,
    U: NDArray[np.float64],
    A: NDArray[np.int8],
    y: NDArray[np.int8],
) -> NDArray[np.float64]:
    """F_{a,y} on the grid for the four cells; shape ``grid.shape + (2, 2)`` ([a, y])."""
    return grid.kernel_apply(kernel_cell_weights(grid, U, A, y))


def _smoother(axis: NDArray[np.float64], width: float) -> NDArray[np.float64]:
    """Row-normalised Gaussian smoothing matrix of ``width`` on one public axis (I if 0)."""
    if width <= 0:
        return np.eye(axis.size)
    k = np.exp(-0.5 * ((axis[:, None] - axis[None, :]) / width) ** 2)
    return np.asarray(k / k.sum(axis=1, keepdims=True), dtype=np.float64)


def _apply_axes(mats: tuple[NDArray[np.float64], ...], arr: NDArray[np.float64]
                ) -> NDArray[np.float64]:
    """(S_1 ⊗ … ⊗ S_d) applied to the leading d axes of ``arr``."""
    out = arr
    for axis, mat in enumerate(mats):
        out = np.moveaxis(np.tensordot(mat, out, axes=(1, axis)), 0, axis)
    return np.ascontiguousarray(out, dtype=np.float64)


def sure_smooth(
    grid: KroneckerGaussianGrid,
    noisy: NDArray[np.float64],
    noise_sd: float,
    ladder: tuple[float, ...] = SMOOTH_LADDER,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Smooth released cell sums by the width, per group, of least estimated squared error.

    ``noisy`` (shape ``grid.shape + (2, 2)``, [a, y]) is Y = F + N, the release of
    :meth:`~dpfair.mechanisms.GaussianProcessMechanism.release_binned`: N is (up to the
    lattice) Gaussian with covariance σ′²·⊗_i R_iR_iᵀ, σ′ = ``noise_sd`` (its public
    :meth:`~dpfair.mechanisms.GaussianProcessMechanism.noise_scale_for`) and R_i the grid's
    public roots. For a linear smoother S = ⊗_i S_i (row-normalised Gaussian of width s·h on
    each axis, s from the public ``ladder``) Stein's identity gives the unbiased estimate

        E‖SY − F‖² = E‖SY − Y‖² + 2σ′² tr(S Σ) − σ′² tr(Σ),  tr(S Σ) = Π_i tr(S_i R_iR_iᵀ),

    so per group a the width minimising Σ_y ‖S Y_{a,y} − Y_{a,y}‖² + 4σ′² tr(S Σ) is used
    for both of its cells (G and H of η̃_a share S, so where S only rescales they keep
    their ratio). Where the privacy noise dominates the signal's curvature (a smooth η at
    small ε) a wide smoother is chosen; where it does not, s = 0 (no change). The target is
    F at the bandwidth h, so the sampling error is left to the bandwidth rule.

    Privacy: a function of the released values, the public grid and the public noise scale
    only, so it is post-processing of the S1 release and the guarantee is unchanged.

    Returns
    -------
    smoothed : ndarray, same shape as ``noisy``
    widths : ndarray of shape (2,)
        The chosen s/h per group.
    noise_factor : ndarray of shape (2,)
        Per group, sqrt(tr(S Σ Sᵀ)/tr(Σ)) ≤ 1: the root-mean-square noise of the smoothed
        sums relative to the release's (1 where s = 0); the ratio's regulariser λ is scaled
        by it (:func:`release_s1_from_weights`), so λ keeps tracking the noise left.
    """
    h = grid.length_scale
    out = np.array(noisy, dtype=np.float64, copy=True)
    widths = np.zeros(2)
    factor = np.ones(2)
    covs = [root @ root.T for root in grid.roots]
    var = float(noise_sd) ** 2
    n_cells = noisy.shape[-1]
    axes = (*range(grid.ndim), noisy.ndim - 1)  # all but the group axis
    best = np.full(2, np.inf)
    for s in ladder:
        mats = tuple(_smoother(ax, s * h) for ax in grid.axes)
        SY = _apply_axes(mats, noisy)  # all four cells at once
        trace = float(np.prod([np.sum(m * c.T) for m, c in zip(mats, covs, strict=True)]))
        crit = np.sum((SY - noisy) ** 2, axis=axes) + 2.0 * var * trace * n_cells
        better = crit < best
        if better.any():
            left = math.sqrt(float(np.prod([np.trace(m @ c @ m.T) / np.trace(c)
                                            for m, c in zip(mats, covs, strict=True)])))
            for a in np.flatnonzero(better):
                best[a] = crit[a]
                out[..., a, :] = SY[..., a, :]
                widths[a] = float(s)
                factor[a] = left
    return out, widths, factor


def smooth_release(
    grid: KroneckerGaussianGrid, noisy: NDArray[np.float64], noise_sd: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The S1 post-smoothing: (smoothed sums, noise factor per group).

    Always :func:`sure_smooth` first. On two-feature grids with equal spacing its output is
    the pilot of :func:`dpfair.fairclass._oriented.oriented_smooth`, which compares, per
    group, smoothing along 8 public directions and the shipped equal widths by an estimate
    of the error of η̃ itself. Post-processing of the S1 release either way.
    """
    smoothed, _widths, left = sure_smooth(grid, noisy, noise_sd)
    if noise_sd > 0 and _oriented.supports(grid):
        smoothed, _chosen, left = _oriented.oriented_smooth(
            grid, noisy, noise_sd, pilot=smoothed, pilot_factor=left,
            ridge=RIDGE * float(noise_sd), pilot_widths=SMOOTH_LADDER)
    return smoothed, left


def release_s1(
    grid: KroneckerGaussianGrid,
    U: NDArray[np.float64],
    A: NDArray[np.int8],
    y: NDArray[np.int8],
    *,
    sigma_count: float | None,
    mechanism: GaussianProcessMechanism | None,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """S1 on one training half: (η̃ on the grid, π̃), private when a mechanism is given.

    Privacy (``fairclass/_budget.py`` module docstring): the count noise N(0, σ_c²) and the
    Gaussian-process noise σ_f·W on the four cell sums form one Gaussian mechanism of level
    μ₁ = sqrt(1/σ_c² + 2/σ_f²). Without ``mechanism`` this is the non-private plug-in.
    """
    return release_s1_from_weights(
        grid,
        kernel_cell_weights(grid, U, A, y),
        n=U.shape[0],
        n1=int(np.sum(A == 1)),
        sigma_count=sigma_count,
        mechanism=mechanism,
        rng=rng,
    )


def _lattice_noise(n: int, sigma: float, rng: np.random.Generator) -> float:
    """Exact discrete Gaussian count noise on a public lattice (n public, σ public).

    The lattice 2^-b·ℤ and the variance S ≥ σ²4^b + 64 come from n and σ only
    (:class:`~dpfair.mechanisms.discrete_gaussian.LatticeNoise`); integer count + noise is
    exact in binary64, so the released count is c + Z with Z independent of the data. With
    sensitivity 1 (2^b lattice units) it is 1/(2σ²)-zCDP or less and satisfies every
    (ε, δ_c + ξ) that N(0, σ²) satisfies, ξ ≤ 10e^ε·2e^{−2π²·64} (CKS 2020;
    :mod:`dpfair.mechanisms.discrete_gaussian`).
    """
    return float(LatticeNoise.for_sigma(sigma, float(n) + 64.0 * sigma).sample(1, rng)[0])


def release_s1_from_weights(
    grid: KroneckerGaussianGrid,
    weights: NDArray[np.float64],
    *,
    n: int,
    n1: int,
    sigma_count: float | None,
    mechanism: GaussianProcessMechanism | None,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """S1 from the exact binned weights W_{a,y} (:func:`kernel_cell_weights`) and counts.

    The data enter only through ``weights``, ``n`` (the public half size) and ``n1``
    (rows of group 1); the kernel sums are released with
    :meth:`GaussianProcessMechanism.release_binned`: the noise is added in the whitened
    space where the sensitivity √2 is proven for the computed values (rule 6 of
    THREATS.md), and ``n`` (the public half size) is the total mass of W. The released
    sums are then smoothed by :func:`sure_smooth` (a width per group chosen from the
    released values and the public noise scale: post-processing, no privacy spent) before
    the ratio η̃, whose regulariser is λ = RIDGE·σ_f times the group's noise factor (the
    share of the noise the smoothing left).
    """
    count1 = float(n1)
    if mechanism is None:
        pi1 = count1 / n
        eta = eta_from_sums(grid.kernel_apply(weights), 0.0)
    else:
        if sigma_count is None:
            raise InvalidParameterError("release_s1: sigma_count is required with a mechanism.")
        n1_noisy = count1 + _lattice_noise(n, sigma_count, rng)
        pi1 = n1_noisy / n
        noisy = mechanism.release_binned(weights, grid, rng, total_mass=float(n))
        noisy, left = smooth_release(grid, noisy, mechanism.noise_scale_for(grid, float(n)))
        eta = eta_from_sums(noisy, RIDGE * mechanism.sigma * left)
    lo = 1.0 / n
    pi1 = float(min(max(pi1, lo), 1.0 - lo))
    return eta, np.array([1.0 - pi1, pi1])


@dataclass(frozen=True, eq=False)
class ReleasedFold(PlugInRule):
    """The released state of one fit: public numbers only, no training rows.

    Attributes
    ----------
    eta : ndarray of shape ``grid.shape + (2,)``
        η̃_a at the grid nodes (last axis: group a = 0, 1).
    pi : ndarray of shape (2,)
        π̃_0, π̃_1.
    tau : float
        The fairness threshold (0 for the unconstrained classifiers).
    """

    eta: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: float

    def eta_at(
        self, grid: KroneckerGaussianGrid, U: NDArray[np.float64], A: NDArray[np.int8]
    ) -> NDArray[np.float64]:
        """η̃_{A_i}(U_i) by multilinear interpolation."""
        both = grid.interpolate(self.eta, U)
        return both[np.arange(U.shape[0]), A.astype(np.intp)]


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix64(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def row_uniforms(U: NDArray[np.float64], A: NDArray[np.int8], salt: int) -> NDArray[np.float64]:
    """A deterministic pseudo-uniform in [0, 1) per row: a SplitMix64 hash of the row's bits.

    Used to turn the cross-fitted (randomised) classifier into a deterministic ``predict``:
    the same row always gets the same draw. This randomness is post-processing and public
    (the salt is drawn at fit time from ``random_state``); it has nothing to do with privacy.
    """
    bits = np.ascontiguousarray(U, dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(U.shape[0], np.uint64(salt & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
        for j in range(bits.shape[1]):
            h = _mix64(h ^ bits[:, j])
        h = _mix64(h ^ A.astype(np.uint64))
    return (h >> np.uint64(11)).astype(np.float64) * (2.0**-53)

"""The Gaussian-process mechanism for functions, released exactly on a public product grid.

A function f_D that lies in the reproducing-kernel Hilbert space (RKHS) H of the Gaussian
kernel k(x, y) = exp(−|x − y|² / (2ℓ²)) is released as f_D + σ·W, where W is a centred
Gaussian process with covariance k (Hall, Rinaldo & Wasserman 2013, "Differential privacy for
functions and functional data", JMLR 14, Cor. 9). Here the release is the finite vector of
values on a public rectangular grid T = T_1 × … × T_d; anything computed from it afterwards
(interpolation, ratios, thresholds) is post-processing.

On a product grid the Gaussian kernel factorises: k(s, t) = Π_i k_i(s_i, t_i), so the grid
covariance is the Kronecker product K = K_1 ⊗ … ⊗ K_d of 1-D Gaussian kernel matrices. An
exact draw of W on the grid costs d eigendecompositions of g_i × g_i matrices and d small
tensor contractions — O(Σ g_i³ + g^d·Σ g_i) — with *no* eigen-truncation: every direction of
the grid covariance receives its noise. This module knows nothing of classifiers; the caller
derives the RKHS sensitivity of its own function.

Privacy (derivation also in ``docs/proofs/fairclass_gp_mechanism.md``):

1. For f ∈ H and a finite set T, write f_T for its values on T and K_T for the kernel matrix.
   Then f_T lies in the range of K_T and f_Tᵀ K_T⁺ f_T ≤ ‖f‖²_H: the left side is the squared
   norm of the projection of f onto span{k(·, t): t ∈ T} (representer theorem).
2. The release f_{D,T} + σ·W_T with W_T ~ N(0, Σ) and Σ ⪰ K_T is the Gaussian mechanism
   with correlated noise. Its privacy-loss distribution between neighbours D, D' is that of a
   one-dimensional Gaussian mechanism with μ = ‖Σ^{-1/2}(f_{D,T} − f_{D',T})‖ / σ, and
   μ² ≤ (f_{D,T} − f_{D',T})ᵀ K_T⁺ (…) / σ² ≤ ‖f_D − f_{D'}‖²_H / σ² ≤ Δ_H² / σ².
   So the release is μ-Gaussian-DP with μ = Δ_H/σ: Δ_H²/(2σ²)-zCDP, and (ε, δ)-DP exactly
   when δ ≥ analytic_gaussian_delta(σ, Δ_H, ε) (Balle & Wang 2018, Thm. 8).
3. Jitter. The implemented grid covariance is Σ = ⊗_i R_i R_iᵀ with R_i R_iᵀ = K_i + E_i +
   (λ-clipping ≥ 0) + jI, where E_i is the backward error of the symmetric eigensolver
   (‖E_i‖ ≲ g_i·1e-16) and j = ``jitter`` (default 1e-8) ≫ ‖E_i‖. Hence R_i R_iᵀ ⪰ K_i and
   Σ ⪰ K (Kronecker products of PSD matrices are PSD): the extra variance is independent
   extra noise, i.e. post-processing. The jitter costs no privacy and adds a relative noise
   standard deviation of about sqrt(j·d) ≈ 1e-4 per grid value at most.
4. As executed (issue 11; ``docs/floating_point.md``). Steps 1–3 hold in real arithmetic.
   Adding σRξ to *computed* kernel sums is not robust: their rounding lands in directions
   where RRᵀ has eigenvalues ≈ j^d (measured whitened differences 2.6 on Adult, ≈ 700 at
   d = 4). :meth:`GaussianProcessMechanism.release_binned` therefore releases
   R·(z + σ′ξ) with z = R⁻¹K·B computed from exact integer binning, a sensitivity bound
   proven for the computed operator (:meth:`KroneckerGaussianGrid.whitened_sensitivity`),
   and z and the noise on a public lattice; CDP-Fair and FDP-Fair use it.
   :meth:`GaussianProcessMechanism.release` (noise on given values) remains for callers
   whose values are exact.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from threadpoolctl import ThreadpoolController

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_in_open_interval, check_positive
from dpfair.mechanisms.discrete_gaussian import round_to_scale
from dpfair.mechanisms.gaussian_calibration import (
    DELTA_SLACK_FRACTION,
    SMOOTHING_VARIANCE,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    check_delta_form,
)
from dpfair.mechanisms.lattice import (
    LatticeNoise,
    gaussian_noise_bits,
    lattice_bits,
    lattice_variance,
    snap_to_lattice,
)
from dpfair.privacy import Budget

__all__ = [
    "GaussianProcessMechanism",
    "KroneckerGaussianGrid",
    "axis_factor_cache_info",
    "gaussian_kernel_matrix",
    "quantize_fraction",
    "single_threaded",
]

_DEFAULT_JITTER = 1e-8
#: Unit roundoff of IEEE-754 binary64 with round-to-nearest.
_UNIT_ROUNDOFF = 2.0**-53
#: Largest number of fractional bits per coordinate of the exact linear-binning weights.
_MAX_BINNING_BITS = 20

_CONTROLLER: ThreadpoolController | None = None


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run the enclosed BLAS/LAPACK calls on one thread.

    The grids here are small (tens of nodes per axis): a multithreaded BLAS only adds
    synchronisation, which on a loaded machine made each 37×37 ``eigh`` take ~14 ms.
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


@dataclass(frozen=True, eq=False)
class _AxisFactors:
    """Per-axis matrices of a grid, computed once per public (axis, ℓ, jitter)."""

    kernel: NDArray[np.float64]  # K_i
    root: NDArray[np.float64]  # R_i = V diag(sqrt(λ⁺ + j)) Vᵀ
    whitened: NDArray[np.float64]  # M_i = V diag(λ⁺ / sqrt(λ⁺ + j)) Vᵀ  (= R_i⁻¹ K_i)
    gram_diag_max: float  # max_a (M_iᵀ M_i)_aa, with a rounding allowance
    gram_min: float  # min_ab (M_iᵀ M_i)_ab, with a rounding allowance
    gram_max_abs: float  # max_ab |(M_iᵀ M_i)_ab|, with a rounding allowance
    abs_norm: float  # ‖ |M_i| ‖₂ (spectral norm of the entrywise absolute value)
    max_abs: float  # max_ab |(M_i)_ab|


@functools.lru_cache(maxsize=64)
def _axis_factors(axis: bytes, length_scale: float, jitter: float) -> _AxisFactors:
    """One ``eigh`` per distinct public axis: sites, folds and refits share it (cached)."""
    nodes = np.frombuffer(axis, dtype=np.float64)
    kern = gaussian_kernel_matrix(nodes, length_scale=length_scale)
    with single_threaded():
        lam, vec = np.linalg.eigh(0.5 * (kern + kern.T))
        lam = np.clip(lam, 0.0, None)
        root = (vec * np.sqrt(lam + jitter)) @ vec.T
        white = (vec * (lam / np.sqrt(lam + jitter))) @ vec.T
        gram = white.T @ white
        slack = 2.0 * nodes.size * _UNIT_ROUNDOFF * float(np.max(np.abs(white).T @ np.abs(white)))
        abs_norm = float(np.linalg.norm(np.abs(white), 2)) * (1.0 + 1e-12)
    for mat in (kern, root, white):
        mat.setflags(write=False)
    return _AxisFactors(
        kernel=kern,
        root=root,
        whitened=white,
        gram_diag_max=float(np.max(np.diag(gram))) + slack,
        gram_min=float(np.min(gram)) - slack,
        gram_max_abs=float(np.max(np.abs(gram))) + slack,
        abs_norm=abs_norm,
        max_abs=float(np.max(np.abs(white))),
    )


def quantize_fraction(frac: NDArray[np.float64], bits: int) -> NDArray[np.int64]:
    """⌊f·2^q + 1/2⌋ clipped to [0, 2^q]: the same IEEE operations as the SQL of
    :func:`dpfair.fairclass.aggregate.kernel_grid_weights` (×2^q is exact)."""
    one = 1 << int(bits)
    return np.clip(np.floor(np.asarray(frac) * float(one) + 0.5), 0, one).astype(np.int64)


def axis_factor_cache_info() -> Any:
    """``functools`` cache statistics of the per-axis factorisations (hits, misses, size)."""
    return _axis_factors.cache_info()


def gaussian_kernel_matrix(
    s: ArrayLike, t: ArrayLike | None = None, *, length_scale: float
) -> NDArray[np.float64]:
    """One-dimensional Gaussian kernel matrix k(s_i, t_j) = exp(−(s_i − t_j)² / (2ℓ²)).

    Parameters
    ----------
    s, t : array-like of shape (m,), (k,)
        Points; ``t`` defaults to ``s``.
    length_scale : float
        ℓ > 0.

    Returns
    -------
    ndarray of shape (m, k)
    """
    ell = check_positive("length_scale", length_scale)
    a = np.asarray(s, dtype=np.float64).reshape(-1)
    b = a if t is None else np.asarray(t, dtype=np.float64).reshape(-1)
    diff = (a[:, None] - b[None, :]) / ell
    return np.exp(-0.5 * diff * diff)


@dataclass(frozen=True, eq=False)
class KroneckerGaussianGrid:
    """A public product grid with the Gaussian kernel's Kronecker structure.

    Parameters
    ----------
    axes : sequence of 1-D arrays
        Strictly increasing grid coordinates per dimension (public: never derived from data).
    length_scale : float
        ℓ of the kernel exp(−|x − y|²/(2ℓ²)) in the units of ``axes``.
    jitter : float, default=1e-8
        Added to each 1-D kernel's eigenvalues before the square root; see the module
        Notes (it only *adds* independent noise, so it costs no privacy).

    Attributes
    ----------
    shape : tuple of int
        Number of nodes per dimension.
    kernels : tuple of ndarray
        The 1-D kernel matrices K_i.
    roots : tuple of ndarray
        Symmetric square roots R_i with R_i R_iᵀ = K_i + jitter·I (up to rounding).

    Notes
    -----
    Three linear maps are provided, all O(g^d·Σ g_i) for a g^d grid:

    * :meth:`kernel_apply` — v ↦ K v, e.g. a binned kernel sum Σ_j w_j k(·, t_j) on the grid;
    * :meth:`sample` — exact draws of the Gaussian process on the grid, covariance ⊗ R_i R_iᵀ;
    * :meth:`interpolate` / :meth:`linear_binning` — multilinear interpolation of grid values
      at arbitrary points, and its adjoint (linear binning: each point's unit mass spread over
      the 2^d surrounding nodes with the same non-negative weights, summing to 1).
    """

    axes: tuple[NDArray[np.float64], ...]
    length_scale: float
    jitter: float = _DEFAULT_JITTER
    kernels: tuple[NDArray[np.float64], ...] = field(init=False, repr=False)
    roots: tuple[NDArray[np.float64], ...] = field(init=False, repr=False)
    _factors: tuple[_AxisFactors, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ell = check_positive("length_scale", self.length_scale)
        jit = float(self.jitter)
        if not (math.isfinite(jit) and jit >= 0.0):
            raise InvalidParameterError(f"jitter={self.jitter!r}: must be a finite number >= 0.")
        if isinstance(self.axes, np.ndarray) and self.axes.ndim == 1:
            raise InvalidParameterError(
                "axes: expected a sequence of 1-D arrays (one per dimension), e.g. "
                "(np.linspace(0, 1, 21),) for a 1-D grid."
            )
        axes = []
        for i, ax in enumerate(self.axes):
            arr = np.asarray(ax, dtype=np.float64).reshape(-1).copy()
            if arr.size < 2 or not np.all(np.isfinite(arr)) or np.any(np.diff(arr) <= 0):
                raise InvalidParameterError(
                    f"axes[{i}]: must hold at least 2 finite, strictly increasing values."
                )
            arr.setflags(write=False)
            axes.append(arr)
        if not axes:
            raise InvalidParameterError("axes: at least one dimension is required.")
        factors = tuple(_axis_factors(a.tobytes(), ell, jit) for a in axes)
        object.__setattr__(self, "axes", tuple(axes))
        object.__setattr__(self, "length_scale", ell)
        object.__setattr__(self, "jitter", jit)
        object.__setattr__(self, "kernels", tuple(f.kernel for f in factors))
        object.__setattr__(self, "roots", tuple(f.root for f in factors))
        object.__setattr__(self, "_factors", factors)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def uniform(
        cls,
        n_dims: int,
        n_nodes: int | tuple[int, ...],
        *,
        length_scale: float,
        low: float = 0.0,
        high: float = 1.0,
        jitter: float = _DEFAULT_JITTER,
    ) -> KroneckerGaussianGrid:
        """Equally spaced nodes from ``low`` to ``high`` (both included) in each dimension."""
        if isinstance(n_nodes, (int, np.integer)):
            counts = (int(n_nodes),) * int(n_dims)
        else:
            counts = tuple(int(c) for c in n_nodes)
        if len(counts) != n_dims or min(counts) < 2:
            raise InvalidParameterError(
                f"n_nodes={n_nodes!r}: need at least 2 nodes in each of the {n_dims} dimensions."
            )
        return cls(
            tuple(np.linspace(low, high, c) for c in counts),
            length_scale=length_scale,
            jitter=jitter,
        )

    # ------------------------------------------------------------------ facts
    @property
    def ndim(self) -> int:
        """Number of dimensions d."""
        return len(self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Nodes per dimension."""
        return tuple(a.size for a in self.axes)

    @property
    def size(self) -> int:
        """Total number of nodes."""
        return int(np.prod(self.shape))

    def nodes(self) -> NDArray[np.float64]:
        """All nodes as an array of shape (size, d), C order."""
        mesh = np.meshgrid(*self.axes, indexing="ij")
        return np.stack([m.reshape(-1) for m in mesh], axis=1)

    # ------------------------------------------------------------------ linear maps
    def _check_values(self, values: ArrayLike) -> NDArray[np.float64]:
        arr = np.asarray(values, dtype=np.float64)
        if arr.shape[: self.ndim] != self.shape:
            raise InvalidParameterError(
                f"values: leading shape {arr.shape[: self.ndim]} does not match the grid "
                f"shape {self.shape}."
            )
        return arr

    def _apply(self, mats: tuple[NDArray[np.float64], ...], arr: NDArray[np.float64]) -> Any:
        out = arr
        with single_threaded():
            for axis, mat in enumerate(mats):
                out = np.moveaxis(np.tensordot(mat, out, axes=(1, axis)), 0, axis)
        return out

    def kernel_apply(self, values: ArrayLike) -> NDArray[np.float64]:
        """(K_1 ⊗ … ⊗ K_d) applied to grid values (trailing axes are batch axes).

        With ``values`` the linear-binning weights of a point set, the result is the kernel
        sum Σ_j w_j k(t, t_j) at every node t.
        """
        return np.ascontiguousarray(self._apply(self.kernels, self._check_values(values)))

    def sample(
        self, rng: RandomLike = None, *, batch_shape: tuple[int, ...] = ()
    ) -> NDArray[np.float64]:
        """Exact draws of the centred Gaussian process with covariance k on the grid.

        Parameters
        ----------
        rng : seed or Generator
            Source of the standard normal draws (never reset or reseeded here).
        batch_shape : tuple of int, default=()
            Independent draws stacked on trailing axes: the output has shape
            ``grid.shape + batch_shape``.

        Returns
        -------
        ndarray
            (⊗ R_i) ξ with ξ standard normal: covariance ⊗ R_i R_iᵀ ⪰ ⊗ K_i exactly (no
            truncation of any eigencomponent).
        """
        gen = as_generator(rng)
        xi = gen.standard_normal(self.shape + tuple(batch_shape))
        return np.ascontiguousarray(self._apply(self.roots, xi))

    def _corner_parts(
        self, points: ArrayLike
    ) -> tuple[NDArray[np.intp], list[NDArray[np.float64]]]:
        """Flat node index of each point's 2^d corners, and its fractional offsets per axis."""
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != self.ndim:
            raise InvalidDataError(f"points: expected shape (n, {self.ndim}), got {pts.shape}.")
        if pts.size and not np.all(np.isfinite(pts)):
            raise InvalidDataError("points: contain NaN or infinite values.")
        n = pts.shape[0]
        lows: list[NDArray[np.intp]] = []
        fracs: list[NDArray[np.float64]] = []
        for i, ax in enumerate(self.axes):
            x = pts[:, i]
            if n and (x.min() < ax[0] or x.max() > ax[-1]):
                raise InvalidDataError(
                    f"points[:, {i}]: values outside the grid [{ax[0]:g}, {ax[-1]:g}]."
                )
            j = np.clip(np.searchsorted(ax, x, side="right") - 1, 0, ax.size - 2)
            lows.append(j)
            fracs.append((x - ax[j]) / (ax[j + 1] - ax[j]))
        d = self.ndim
        n_corners = 1 << d
        strides = np.array([int(np.prod(self.shape[i + 1 :])) for i in range(d)], dtype=np.intp)
        idx = np.zeros((n, n_corners), dtype=np.intp)
        for c in range(n_corners):
            for i in range(d):
                bit = (c >> (d - 1 - i)) & 1
                idx[:, c] += (lows[i] + bit) * strides[i]
        return idx, fracs

    def _corner_weights(self, points: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        idx, fracs = self._corner_parts(points)
        d = self.ndim
        wts = np.ones(idx.shape, dtype=np.float64)
        for c in range(1 << d):
            for i in range(d):
                bit = (c >> (d - 1 - i)) & 1
                wts[:, c] *= fracs[i] if bit else 1.0 - fracs[i]
        return idx, wts

    def interpolate(self, values: ArrayLike, points: ArrayLike) -> NDArray[np.float64]:
        """Multilinear interpolation of grid values at ``points`` (shape (n, d)).

        Trailing axes of ``values`` beyond the grid are carried along: the output has shape
        ``(n,) + values.shape[d:]``. Points must lie inside the grid's box.
        """
        arr = self._check_values(values)
        idx, wts = self._corner_weights(points)
        flat = arr.reshape((self.size, *arr.shape[self.ndim :]))
        gathered = flat[idx]  # (n, corners, ...)
        w = wts.reshape(wts.shape + (1,) * (gathered.ndim - 2))
        return np.asarray((gathered * w).sum(axis=1))

    def linear_binning(
        self, points: ArrayLike, weights: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Spread each point's mass over its 2^d surrounding nodes (adjoint of interpolation).

        The node weights of one point are non-negative and sum to its mass, so the total
        mass is preserved exactly.

        Parameters
        ----------
        points : array of shape (n, d)
            Inside the grid's box.
        weights : array of shape (n,), optional
            Mass per point (default 1).

        Returns
        -------
        ndarray of the grid's shape
        """
        idx, wts = self._corner_weights(points)
        if weights is not None:
            m = np.asarray(weights, dtype=np.float64).reshape(-1)
            if m.size != idx.shape[0]:
                raise InvalidParameterError(f"weights: {m.size} values for {idx.shape[0]} points.")
            wts = wts * m[:, None]
        binned = np.bincount(idx.ravel(), weights=wts.ravel(), minlength=self.size)
        return np.asarray(binned, dtype=np.float64).reshape(self.shape)

    # ------------------------------------------------------------------ exact binning
    @staticmethod
    def binning_bits(n_records: int, n_dims: int) -> int:
        """Fractional bits q of :meth:`exact_binning` for ``n_records`` (public) records.

        The largest q ≤ 20 with n·2^{qd} < 2^62, so the integer weights of all records sum
        without overflow in int64.
        """
        need = max(int(n_records), 1).bit_length()
        return int(max(1, min(_MAX_BINNING_BITS, (62 - need) // max(n_dims, 1))))

    def exact_binning(self, points: ArrayLike, bits: int) -> NDArray[np.int64]:
        """Linear binning with exact integer weights: each point adds 2^{q·d} in total.

        The fractional offset f of a point in its cell is rounded to a multiple of 2^-q
        (a per-record, deterministic rounding), so the 2^d corner weights are the integers
        Π_i (f_i·2^q or 2^q − f_i·2^q), ≥ 0 and summing to exactly 2^{q·d}. They are summed in
        exact integer arithmetic (limbs of w bits through ``bincount``, with n·2^w ≤ 2^53 so
        that its float sums of integers are exact). The result divided by 2^{q·d} is the
        linear binning of the rounded points, with no rounding error at all.
        """
        idx, fracs = self._corner_parts(points)
        d = self.ndim
        one = 1 << bits
        f_int = [quantize_fraction(f, bits) for f in fracs]
        n = idx.shape[0]
        if n * (1 << (bits * d)) >= 2**62:
            raise InvalidParameterError(
                f"bits={bits}: too many for {n} points in {d} dimensions (use binning_bits)."
            )
        wts = np.ones((n, 1 << d), dtype=np.int64)
        for c in range(1 << d):
            for i in range(d):
                bit = (c >> (d - 1 - i)) & 1
                wts[:, c] *= f_int[i] if bit else one - f_int[i]
        flat_idx, flat_w = idx.ravel(), wts.ravel()
        # Limbs of w bits with n·2^w ≤ 2^53: every float partial sum of a limb over any
        # subset of the n records is an integer below 2^53, hence exact, whatever the
        # summation order (two fixed 31-bit limbs were exact only below 2^22 records per
        # node: attack review of issue 11).
        width = max(1, 53 - max(int(n), 1).bit_length())
        tot = np.zeros(self.size, dtype=np.int64)
        shift = 0
        while shift < 63:
            limb = ((flat_w >> shift) & ((1 << width) - 1)).astype(np.float64)
            part = np.bincount(flat_idx, weights=limb, minlength=self.size).astype(np.int64)
            tot += part << shift
            shift += width
        return tot.reshape(self.shape)

    def whiten(self, weights: ArrayLike) -> NDArray[np.float64]:
        """(M_1 ⊗ … ⊗ M_d) applied to binned weights, M_i = R_i⁻¹K_i (computed directly).

        For exact weights B, R·whiten(B) = K·B in real arithmetic: the kernel sums.
        """
        factors = tuple(f.whitened for f in self._factors)
        return np.ascontiguousarray(self._apply(factors, self._check_values(weights)))

    def whitened_sensitivity(self, total_mass: float, weights_l1_error: float = 0.0) -> float:
        r"""Proven bound on ‖whiten(B_D) − whiten(B_D')‖₂ *as computed*, one record replaced.

        Each record adds a non-negative weight vector w of total mass 1 to one trailing
        slot of B. For the computed matrices M = ⊗M_i (whatever their rounding), the real
        change ‖M(w′ − w)‖ is a convex function of (w, w′), so it is largest at unit
        vectors: Δ_M² ≤ max_{a,b} G_aa + G_bb − 2G_ab (same slot) and G_aa + G_bb (two
        slots), with G = MᵀM = ⊗ M_iᵀM_i; both are ≤ 2 max diag G − 2 min(0, min G), bounded
        per axis (:class:`_AxisFactors`, with the rounding of M_iᵀM_i allowed for). In real
        arithmetic G = K − jP with 0 ⪯ P ⪯ I, so Δ_M ≤ √2(1 + O(j)).

        Rounding of the computed z = fl(M·fl(B)): d successive products with g-term dot
        products and one conversion of B to binary64 give
        ‖fl(MB) − MB‖ ≤ (dγ_g + u)(1 + γ_g)^d Π‖|M_i|‖₂ ‖B‖₁ with γ_g = gu/(1 − gu) for any
        summation order, and ‖B‖₁ = ``total_mass`` (the public number of records). If the
        weights themselves carry an error (float-summed elsewhere), ``weights_l1_error``
        bounds ‖B_computed − B‖₁, adding Π‖|M_i|‖₂ times it. Both data sets carry such an
        error, hence the factor 2.
        """
        u = _UNIT_ROUNDOFF
        g = max(self.shape)
        gamma = g * u / (1.0 - g * u)
        diag = math.prod(f.gram_diag_max for f in self._factors)
        lo, hi = 1.0, 1.0
        for f in self._factors:
            cands = (lo * f.gram_min, lo * f.gram_max_abs, hi * f.gram_min, hi * f.gram_max_abs)
            lo, hi = min(cands), max(cands)
        delta_m = math.sqrt(max(2.0 * diag - 2.0 * min(0.0, lo), 0.0))
        norm = math.prod(f.abs_norm for f in self._factors)
        round_err = (self.ndim * gamma + u) * (1.0 + gamma) ** self.ndim * norm * total_mass
        weight_err = norm * float(weights_l1_error)
        return (delta_m + 2.0 * (round_err + weight_err)) * (1.0 + 1e-12)

    def rkhs_norm_sq(self, coefficients: ArrayLike) -> float:
        """‖Σ_j c_j k(·, t_j)‖²_H = cᵀ K c for coefficients c on the grid nodes."""
        c = self._check_values(coefficients)
        return float(np.sum(c * self.kernel_apply(c)))


@dataclass(frozen=True, slots=True)
class GaussianProcessMechanism:
    """Release a function as f + σ·W on a public grid, W the Gaussian process of the kernel.

    Parameters
    ----------
    sigma : float
        Noise multiplier σ > 0: the released values are f(t) + σ·W(t).
    rkhs_sensitivity : float, default=1
        Δ_H ≥ sup over neighbouring data sets of ‖f_D − f_{D'}‖_H, in the RKHS of the same
        kernel as W's covariance. For several functions released together (independent
        processes), the joint norm sqrt(Σ_m ‖f_{D,m} − f_{D',m}‖²_H).

    Notes
    -----
    Privacy (module docstring; Hall, Rinaldo & Wasserman 2013, Cor. 9, with the exact
    Gaussian calibration of Balle & Wang 2018 in place of their classical constant): the
    release is μ-Gaussian-DP with μ = Δ_H/σ under replace-one neighbours, so it is
    Δ_H²/(2σ²)-zCDP (:attr:`privacy`) and (ε, δ)-DP with δ = analytic_gaussian_delta(σ,
    Δ_H, ε) (:meth:`privacy_at`). Exactly the same numbers as the scalar Gaussian mechanism
    with L2 sensitivity Δ_H, because the guarantee is that of a one-dimensional Gaussian in
    the Mahalanobis metric of the kernel.
    """

    sigma: float
    rkhs_sensitivity: float = 1.0

    def __post_init__(self) -> None:
        check_positive("sigma", self.sigma)
        check_positive("rkhs_sensitivity", self.rkhs_sensitivity)

    @classmethod
    def for_approx(
        cls, epsilon: float, delta: float, rkhs_sensitivity: float = 1.0
    ) -> GaussianProcessMechanism:
        """Smallest σ that is (ε, δ)-DP (analytic Gaussian calibration on Δ_H)."""
        return cls(
            sigma=analytic_gaussian_sigma(epsilon, delta, rkhs_sensitivity),
            rkhs_sensitivity=float(rkhs_sensitivity),
        )

    @classmethod
    def for_zcdp(cls, rho: float, rkhs_sensitivity: float = 1.0) -> GaussianProcessMechanism:
        """σ = Δ_H / sqrt(2ρ), so that Δ_H²/(2σ²) = ρ."""
        r = check_positive("rho", rho)
        sens = check_positive("rkhs_sensitivity", rkhs_sensitivity)
        return cls(sigma=sens / math.sqrt(2.0 * r), rkhs_sensitivity=sens)

    @property
    def mu(self) -> float:
        """Gaussian-DP parameter μ = Δ_H / σ."""
        return self.rkhs_sensitivity / self.sigma

    @property
    def privacy(self) -> Budget:
        """ρ-zCDP with ρ = Δ_H² / (2σ²)."""
        return Budget.zcdp(self.rkhs_sensitivity**2 / (2.0 * self.sigma**2))

    def privacy_at(self, delta: float) -> Budget:
        """An (ε, δ) guarantee at this δ that holds for :meth:`release_binned` as executed.

        ε is the analytic-Gaussian ε at δ_c = δ(1 − 2^-40): the exact discrete Gaussian
        noise of :meth:`release_binned` is (ε, δ_c + ξ)-DP with ξ ≤ δ·2^-41 for any
        practical ε (``mechanisms.gaussian_calibration.approx_dp_sigma_target``). For the
        continuous :meth:`release` this is conservative by a relative 2^-40 in δ.
        """
        dl = check_in_open_interval("delta", delta, 0.0, 1.0)
        budget = self._privacy_at_continuous(dl * (1.0 - DELTA_SLACK_FRACTION))
        eps = float(budget.epsilon or 0.0)
        check_delta_form(eps, dl, 2**40)  # refuse an (ε, δ) that is not proven
        return Budget.approx(eps, dl, note="Gaussian process mechanism, discrete Gaussian noise")

    def _privacy_at_continuous(self, dl: float) -> Budget:
        if analytic_gaussian_delta(self.sigma, self.rkhs_sensitivity, 0.0) <= dl:
            return Budget.approx(0.0, dl)
        lo, hi = 0.0, 1.0
        while analytic_gaussian_delta(self.sigma, self.rkhs_sensitivity, hi) > dl:
            lo, hi = hi, hi * 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if analytic_gaussian_delta(self.sigma, self.rkhs_sensitivity, mid) > dl:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-13 * max(hi, 1.0):
                break
        return Budget.approx(hi, dl, note="Gaussian process mechanism, analytic calibration")

    def release(
        self,
        values: ArrayLike,
        grid: KroneckerGaussianGrid,
        rng: RandomLike = None,
    ) -> NDArray[np.float64]:
        """Return ``values + σ·W`` on ``grid`` with fresh Gaussian-process noise (continuous).

        The continuous binary64 primitive, for simulation and analysis: rounding of
        arbitrary ``values`` lands in the covariance's small-eigenvalue directions and
        the noise is numpy's normal, so it is not safe against floating-point attacks
        (``docs/floating_point.md``). Releases use :meth:`release_binned`.

        Parameters
        ----------
        values : array of shape ``grid.shape`` or ``grid.shape + (m,)``
            The function(s) at the grid nodes; trailing axes get independent processes.
            The caller must ensure ``rkhs_sensitivity`` bounds their joint RKHS change for
            the kernel with ``grid.length_scale``.
        grid : KroneckerGaussianGrid
        rng : seed or Generator
        """
        if not isinstance(grid, KroneckerGaussianGrid):
            raise InvalidParameterError(
                f"grid={grid!r}: expected a KroneckerGaussianGrid (the public evaluation grid)."
            )
        arr = grid._check_values(values)
        noise = grid.sample(rng, batch_shape=arr.shape[grid.ndim :])
        return arr + self.sigma * noise

    def noise_scale_for(self, grid: KroneckerGaussianGrid, total_mass: float,
                        weights_l1_error: float = 0.0, n_slots: int = 4) -> float:
        """Noise multiplier actually used by :meth:`release_binned`: σ·max(1, Δ_eff/Δ_H).

        Δ_eff = the proven bound on the computed whitened change
        (:meth:`KroneckerGaussianGrid.whitened_sensitivity`) plus the lattice snapping
        slack sqrt(#values)·2^-k.
        """
        bits = self.lattice_bits_for(grid, total_mass, weights_l1_error)
        n_values = grid.size * int(n_slots)  # values released (``n_slots`` functions)
        bound = grid.whitened_sensitivity(total_mass, weights_l1_error) + math.sqrt(
            n_values) * 2.0**-bits
        return self.sigma * max(1.0, bound / self.rkhs_sensitivity)

    def release_binned(
        self,
        weights: ArrayLike,
        grid: KroneckerGaussianGrid,
        rng: RandomLike = None,
        *,
        total_mass: float,
        weights_l1_error: float = 0.0,
    ) -> NDArray[np.float64]:
        r"""Release the kernel sums K·B of binned weights B, robustly to rounding.

        The release is computed as R·(z + σ′ξ) with z = :meth:`~KroneckerGaussianGrid.whiten`
        (B) = R⁻¹K·B and ξ standard normal: in real arithmetic exactly the law of
        :meth:`release` on K·B (mean K·B, covariance σ′²RRᵀ). As executed, the data enter
        only through the computed vector z, released with *white* noise σ′ξ (then
        multiplied by the public R: post-processing), so the guarantee needs a bound on
        ‖z_D − z_D'‖ for the computed z, not for real numbers:
        :meth:`KroneckerGaussianGrid.whitened_sensitivity` proves Δ_eff ≤ √2(1 + ~1e-8) for
        weights where each record is a non-negative unit mass in one trailing slot (the
        binned kernel sums of CDP-Fair/FDP-Fair). The noise is σ′ = σ·max(1, Δ_eff/Δ_H), so
        the release is μ-GDP with μ = Δ_H/σ as stated by :attr:`privacy` whatever the
        rounding: any slack is paid in noise, not hidden. Finally z and the noise are both
        snapped to the public lattice 2^-k·Z (:meth:`lattice_bits_for`, from public n and
        σ) and added exactly, so the released vector is z_q + Z with Z independent of the
        data (``snap_to_lattice``); snapping z costs sqrt(#values)·2^-k more sensitivity,
        included in σ′.

        Parameters
        ----------
        weights : array of shape ``grid.shape + (m,)``
            Binned weights B (e.g. :meth:`~KroneckerGaussianGrid.exact_binning` / 2^{qd}).
        grid : KroneckerGaussianGrid
        rng : seed or Generator
        total_mass : float
            The public number of records (‖B‖₁).
        weights_l1_error : float, default=0
            Bound on the L1 rounding error of ``weights`` (0 for exact integer binning).

        Notes
        -----
        Running time depends only on the public grid shape and the number of slots.
        """
        if not isinstance(grid, KroneckerGaussianGrid):
            raise InvalidParameterError(
                f"grid={grid!r}: expected a KroneckerGaussianGrid (the public evaluation grid)."
            )
        z = grid.whiten(weights)
        bits = self.lattice_bits_for(grid, total_mass, weights_l1_error)
        # snapping moves each coordinate by ≤ 2^-k/2 on each data set: slack sqrt(D)·2^-k
        scale = self.noise_scale_for(grid, total_mass, weights_l1_error, z.size // grid.size)
        gen = as_generator(rng)
        noise = self._lattice_noise(scale, bits).sample(z.shape, gen)
        noisy = snap_to_lattice(z, bits) + noise  # exact: both on 2^-k·Z, small enough
        return np.ascontiguousarray(grid._apply(grid.roots, noisy))

    @staticmethod
    def _lattice_noise(scale: float, bits: int) -> LatticeNoise:
        """Exact discrete Gaussian white noise of nominal sd σ′ on 2^-k·ℤ (k = ``bits``)."""
        s0 = lattice_variance(scale, bits, SMOOTHING_VARIANCE)
        return LatticeNoise(float(scale), int(bits), round_to_scale(s0))

    def lattice_bits_for(self, grid: KroneckerGaussianGrid, total_mass: float,
                         weights_l1_error: float = 0.0) -> int:
        """k of the public lattice 2^-k·Z on which :meth:`release_binned` adds its noise.

        From public numbers only: |z_t| ≤ Π_i max|M_i|·(total_mass + weights_l1_error),
        plus 64 noise standard deviations.
        """
        zmax = math.prod(f.max_abs for f in grid._factors) * (
            float(total_mass) + float(weights_l1_error)) * (1.0 + 1e-6)
        # ≤ 25 bits finer than σ: the discrete Gaussian sampler's integers stay in int64
        # (σ′·2^k < 2^26), while the snapping slack sqrt(#values)·2^-k stays ≤ ~1e-4·σ
        # relative for grids up to 2^20 values
        return min(lattice_bits(zmax + 64.0 * 2.0 * self.sigma),
                   gaussian_noise_bits(self.sigma, 0.0, 25))

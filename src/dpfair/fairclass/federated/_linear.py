"""FDP-Fair's linear group score: one round of noisy sufficient statistics per site.

``estimator="linear"`` replaces the kernel sums of round 1 by the sufficient statistics of
the quadratic (second-order Taylor at θ = 0) approximation of the logistic loss of the model

    η̃(x, a) = sigmoid(θ · ψ(x, a)),   ψ(x, a) = (1, a, w(x)),

where w(x) is the *public* row map: numeric columns centred at the midpoint of their
public box and scaled by its half-width (so each lies in [−1, 1]), one-hot columns 0/1 over
their public category lists (:class:`~dpfair.fairclass._linear.FeatureMap`), the vector
then clipped to the public L2 radius r and divided by r, so ‖w‖₂ ≤ 1. Derivation, choice
and proof: ``docs/proofs/fdp_linear.md``.

**Released per fold (on the training half T, together with the group-1 count ñ₁ of
``_protocol.py``).** With Q(x) ∈ ℤ^p the row w(x) on the lattice 2^-q·ℤ^p
(:func:`lattice_rows`: truncation toward zero, then ‖Q‖₂ ≤ 2^q checked *exactly* in
integers, halving toward zero a row that fails):

* ``sums``    the three vectors the model uses, ∈ ℤ^{p×3}: the group sums
  G_a = Σ_{i∈T: A_i=a} Q(x_i) (a = 0, 1) and the label contrast V = Σ_{i∈T} (2Y_i − 1)Q(x_i).
  L2 sensitivity 2√2·2^q: a record that stays in its (a, y) cell moves G_a by Q − Q′ and V
  by ±(Q − Q′), ‖·‖² ≤ 2·(2·2^q)²; one that changes label moves G_a by Q − Q′ and V by
  ±(Q + Q′), ‖Q − Q′‖² + ‖Q + Q′‖² = 2‖Q‖² + 2‖Q′‖² ≤ 4·4^q; one that changes group moves
  G_0, G_1 by Q, Q′ and V by at most 2·2^q: ≤ 6·4^q. (The four (a, y) cell sums released
  before carried the a × y interaction Σ(2A − 1)(2Y − 1)Q, which no coefficient of the model
  uses; at the same budget the label contrast, i.e. the gradient, now has half the
  variance.)
* ``cells``   n_{a,y} = #{i ∈ T: A_i = a, Y_i = y} ∈ ℤ^{2×2}; sensitivity √2 (released on
  2^-6·ℤ);
* ``moments`` the upper triangle of M = Σ_i Q(x_i)Q(x_i)ᵀ ∈ ℤ^{p×p}; ‖QQᵀ − Q′Q′ᵀ‖_F² =
  ‖Q‖⁴ + ‖Q′‖⁴ − 2(Q·Q′)² ≤ 2·16^q, so the Frobenius sensitivity is √2·4^q. The diagonal
  gets noise variance σ_M² (lattice 4^-q), each off-diagonal entry σ_M²/2: then
  Σ_j δ_jj²/σ_M² + Σ_{j<k} δ_jk²/(σ_M²/2) = ‖δ‖_F²/σ_M² ≤ 2/σ_M² (in w units).

Each block is its exact integer vector plus exact discrete Gaussian noise (the package's
sampler, :func:`dpfair.mechanisms.sample_discrete_gaussian`), so together they are one
Gaussian mechanism with μ_L² = 8/σ_S² + 2/σ_n² + 2/σ_M² (sup of a sum ≤ sum of sups);
the shares of μ_L² are :data:`SHARES`. With the count (μ_c) this is one round-1 release of
μ₁² = μ_c² + μ_L², exactly the kernel estimator's μ₁ (``_protocol.site_plan`` with
``function_sensitivity`` = :data:`LINEAR_FUNCTION_SENSITIVITY`, so σ_f = σ_S).

**Centre (post-processing).** Sums over sites of the released statistics give
Σψψᵀ and Σ(y − 1/2)ψ of the pooled training halves plus noise of public variance. The model
minimises the regularised quadratic surrogate, solved in its Schur form (:func:`fit_theta`):
with z = (1, a), the w coefficients are θ̃_w = 4(Ŝ_κ + Λ)^-1 ĝ_c, where Ŝ = M̂_ww −
M̂_wz M̂_zz^-1 M̂_zw is the within-group scatter of w (its moments of two categories of one
column use their true value 0, :func:`structural_zeros`), ĝ_c the correspondingly centred
gradient, Ŝ_κ keeps the diagonal of Ŝ and multiplies its off-diagonal by the positive-part
James–Stein factor κ = max(0, 1 − m·σ_off²/Σ Ŝ_jk²) (the sum over the m pairs j < k
that carry moment noise, not the structural zeros, each of public variance σ_off² =
σ_M,agg²/2: the data's own estimate of how much of the off-diagonal is signal), and
Λ = :data:`RIDGE_FACTOR`·σ_M,agg·√p; then θ̃_z = M̂_zz^-1(4ĝ_z − M̂_zw θ̃_w). Everything
the centre computes is a function of released numbers and public parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._linear import FeatureMap
from dpfair.fairclass._rule import PlugInRule
from dpfair.mechanisms import (
    SMOOTHING_VARIANCE,
    lattice_variance,
    sample_discrete_gaussian,
)
from dpfair.mechanisms import round_to_scale as _round_to_scale

__all__ = [
    "LINEAR_FUNCTION_SENSITIVITY",
    "LINEAR_LATTICE_BITS",
    "MAX_LINEAR_WIDTH",
    "SHARES",
    "SUMS_SENSITIVITY",
    "LinearSigmas",
    "ReleasedFedLinearFold",
    "default_radius",
    "fit_theta",
    "js_factor",
    "lattice_rows",
    "linear_cell_stats",
    "linear_sigmas",
    "noise_sd",
    "numeric_mask",
    "release_linear_stats",
    "row_map",
    "structural_zeros",
]

#: Bits q of the per-coordinate lattice 2^-q of w (moments live on 4^-q).
LINEAR_LATTICE_BITS = 12
#: The cell counts are released on 2^-CELL_BITS·ℤ (so the sampler's smoothing variance is
#: negligible next to σ_n²).
CELL_BITS = 6
#: Shares of μ_L² (round 1's budget after the group count): sums, cells, moments.
SHARES = (0.5, 0.05, 0.45)
#: L2 sensitivity of the ``sums`` block in w units: 2√2 (module docstring).
SUMS_SENSITIVITY = 2.0 * math.sqrt(2.0)
#: σ_f of the site plan is σ_S = 2√2/(μ_f·√share_S): the "function sensitivity" 2√2/√share_S.
LINEAR_FUNCTION_SENSITIVITY = SUMS_SENSITIVITY / math.sqrt(SHARES[0])
#: Public limit on p (the moments are p(p+1)/2 numbers per fold).
MAX_LINEAR_WIDTH = 512
#: Ridge Λ = RIDGE_FACTOR·σ_M,agg·√p on the w coordinates (σ_M,agg: the aggregate noise sd
#: of one moment entry): the spectral edge of the noise matrix is ≈ 2σ_M,agg·√p.
RIDGE_FACTOR = 1.0
_INT_LIMIT = 2**62
_FLOAT_EXACT = 2**53


def numeric_mask(fmap: FeatureMap) -> NDArray[np.bool_]:
    """True at the numeric columns of u(x) (one-hot columns False), shape (p,)."""
    out: list[bool] = []
    for j, b in enumerate(fmap.bounds):
        out.extend([True] if b is not None else [False] * len(fmap.categories[j]))
    return np.array(out, dtype=bool)


def structural_zeros(fmap: FeatureMap) -> NDArray[np.bool_]:
    """True at the pairs (j, k), j ≠ k, of two categories of the same one-hot column: every
    row has w_j·w_k = 0 there (one category per column), so the true moment is 0 — a public
    fact the centre uses instead of the noisy value (post-processing). Shape (p, p)."""
    block: list[int] = []
    for j, b in enumerate(fmap.bounds):
        block.extend([-1 - j] if b is not None else [j] * len(fmap.categories[j]))
    ids = np.array(block)
    same = (ids[:, None] == ids[None, :]) & (ids[:, None] >= 0)
    return np.asarray(same & ~np.eye(ids.size, dtype=bool))


def default_radius(fmap: FeatureMap) -> float:
    """√(k + c): the largest ‖w‖ any record can have (k numeric, c categorical columns;
    each numeric coordinate lies in [−1, 1], each one-hot block has norm 1) — no clipping."""
    return math.sqrt(fmap.n_numeric + fmap.n_categorical)


def check_radius(radius: Any, fmap: FeatureMap) -> float:
    """Validate the public radius (None: :func:`default_radius`)."""
    if radius is None:
        return default_radius(fmap)
    try:
        r = float(radius)
    except (TypeError, ValueError):
        r = math.nan
    if isinstance(radius, bool) or not (math.isfinite(r) and 1e-3 <= r <= 1e6):
        raise InvalidParameterError(
            f"radius={radius!r}: expected a public number in [0.001, 1e6] (the L2 radius of "
            "the centred rows, in half-widths of the public box; None: no clipping)."
        )
    return r


def row_map(
    U: NDArray[np.float64], numeric: NDArray[np.bool_], radius: float
) -> NDArray[np.float64]:
    """w(x)/r: numeric u ∈ [0, 1] ↦ 2u − 1, one-hot kept, clipped to ‖·‖ ≤ r, divided by r.

    A public map of one record (floating point; the lattice step makes the bound exact)."""
    W = np.array(U, dtype=np.float64, copy=True)
    W[:, numeric] = 2.0 * W[:, numeric] - 1.0
    norms = np.sqrt(np.einsum("ij,ij->i", W, W))
    scale = np.minimum(1.0, radius / np.maximum(norms, 1e-300)) / radius
    return W * scale[:, None]


def lattice_rows(V: NDArray[np.float64], bits: int = LINEAR_LATTICE_BITS) -> NDArray[np.int64]:
    """Q ∈ ℤ^{n×p} with Σ_j Q_ij² ≤ 4^bits for every row, checked in exact int64.

    Q = trunc(V·2^bits); a row that fails the exact check (only through rounding) is
    halved toward zero until it passes. Whatever the floating-point values of V, every
    returned row has ‖Q‖₂ ≤ 2^bits: the sensitivity bounds hold for the rows as computed.
    """
    if not np.all(np.isfinite(V)) or np.any(np.abs(V) > 2.0):
        raise InvalidParameterError("lattice_rows: rows must be finite with |v| <= 2.")
    Q = np.trunc(V * float(2**bits)).astype(np.int64)
    limit = np.int64(4**bits)
    for _ in range(64):
        bad = np.einsum("ij,ij->i", Q, Q) > limit  # int64: ≤ p·4^(bits+1) < 2^63
        if not np.any(bad):
            return Q
        Q[bad] = Q[bad] // 2 + (Q[bad] < 0) * (Q[bad] % 2)  # halve toward zero, exactly
    raise AssertionError("unreachable: halving 64 times reaches 0")  # pragma: no cover


def _exact_gram(Q: NDArray[np.int64]) -> NDArray[np.int64]:
    """QᵀQ exactly: float64 BLAS when every partial sum is an integer below 2^53 (each
    |Q_ij Q_ik| ≤ 4^q, so n·4^q < 2^53 suffices whatever the summation order), else int64."""
    n = Q.shape[0]
    bound = n * int(np.max(np.abs(Q), initial=0)) ** 2
    if bound < _FLOAT_EXACT:
        F = Q.astype(np.float64)
        return np.rint(F.T @ F).astype(np.int64)
    return Q.T @ Q


def linear_cell_stats(
    Q: NDArray[np.int64], A: NDArray[Any], y: NDArray[Any]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Exact integer (sums (p, 3), cells (2, 2), upper-triangle moments (p(p+1)/2,)).

    ``sums[:, a]`` = Σ_{A=a} Q (a = 0, 1), ``sums[:, 2]`` = Σ (2Y − 1)Q (int64: each
    |sum| ≤ n·2^q)."""
    p = Q.shape[1]
    sums = np.zeros((p, 3), dtype=np.int64)
    cells = np.zeros((2, 2), dtype=np.int64)
    sign = np.where(np.asarray(y) == 1, 1, -1).astype(np.int64)
    for a in (0, 1):
        grp = A == a
        sums[:, a] = Q[grp].sum(axis=0, dtype=np.int64)
        for yy in (0, 1):
            cells[a, yy] = int(np.count_nonzero(grp & (y == yy)))
    sums[:, 2] = (Q * sign[:, None]).sum(axis=0, dtype=np.int64)
    iu = np.triu_indices(p)
    return sums, cells, _exact_gram(Q)[iu]


@dataclass(frozen=True)
class LinearSigmas:
    """Noise sds (in w units) of one site's linear statistics, from its μ_f (public).

    ``sums`` is σ_S per coordinate of the three sum vectors; ``moments`` is the diagonal's
    σ_M; each off-diagonal moment has σ_M/√2."""

    sums: float
    cells: float
    moments: float

    @property
    def mu(self) -> float:
        """μ_L = sqrt(8/σ_S² + 2/σ_n² + 2/σ_M²) (module docstring)."""
        return math.sqrt(SUMS_SENSITIVITY**2 / self.sums**2 + 2.0 / self.cells**2
                         + 2.0 / self.moments**2)


#: The sds are inflated by this factor so that the few roundings in deriving them from
#: μ_f can only lower the spent μ (never raise it above the plan's).
_SIGMA_SLACK = 1.0 + 2.0**-40


def linear_sigmas(sigma_function: float) -> LinearSigmas:
    """The three sds from the plan's σ_f = 2√2/(μ_f·√share_S) (each ≥ its exact value)."""
    mu_f = LINEAR_FUNCTION_SENSITIVITY / float(sigma_function)
    _s_sum, s_cell, s_mom = SHARES  # σ_S = σ_f by construction of the plan
    return LinearSigmas(
        sums=float(sigma_function) * _SIGMA_SLACK,
        cells=math.sqrt(2.0) / (mu_f * math.sqrt(s_cell)) * _SIGMA_SLACK,
        moments=math.sqrt(2.0) / (mu_f * math.sqrt(s_mom)) * _SIGMA_SLACK,
    )


def _noise(
    sigma: float, bits: int, shape: Any, rng: np.random.Generator, *, halve: bool = False
) -> NDArray[np.int64]:
    """Exact discrete Gaussian N_ℤ(0, S) in units of 2^-bits with S ≥ σ²4^bits (or, with
    ``halve``, ≥ σ²4^bits/2 exactly: the off-diagonal moments) plus the smoothing variance,
    rounded up to the sampler's scale (the construction of the RFF and count releases)."""
    base = lattice_variance(float(sigma), int(bits))  # ⌈σ²4^bits⌉, σ read exactly
    if halve:
        base = -(-base // 2)
    var = _round_to_scale(base + SMOOTHING_VARIANCE)
    return np.asarray(sample_discrete_gaussian(var, shape, rng), dtype=np.int64)


def release_linear_stats(
    sums: NDArray[np.int64],
    cells: NDArray[np.int64],
    moments: NDArray[np.int64],
    n_rows: int,
    sigmas: LinearSigmas,
    rng: np.random.Generator,
    bits: int = LINEAR_LATTICE_BITS,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The three noisy blocks (module docstring), scaled back to w units.

    μ_L-GDP (μ_L = :attr:`LinearSigmas.mu`) for statistics of :func:`lattice_rows` rows, up
    to the discrete sampler's lattice slack (the site's GDP plan is calibrated for it).
    """
    p = sums.shape[0]
    off = np.ones(p * (p + 1) // 2, dtype=bool)
    off[_diag_positions(p)] = False
    big = max(sigmas.sums, sigmas.moments, sigmas.cells)
    if (n_rows + 64.0 * big) * 4.0**bits >= _INT_LIMIT:
        raise InvalidParameterError(
            f"release_linear_stats: N = {n_rows} rows with noise sd {big:g} exceed the exact "
            "int64 range of the lattice; use fewer rows per site or a larger budget."
        )
    s = sums + _noise(sigmas.sums, bits, sums.shape, rng)
    c = cells * 2**CELL_BITS + _noise(sigmas.cells, CELL_BITS, cells.shape, rng)
    m = moments.copy()
    m[~off] += _noise(sigmas.moments, 2 * bits, int((~off).sum()), rng)
    m[off] += _noise(sigmas.moments, 2 * bits, int(off.sum()), rng, halve=True)
    return (
        s.astype(np.float64) / float(2**bits),
        c.astype(np.float64) / float(2**CELL_BITS),
        m.astype(np.float64) / float(4**bits),
    )


def noise_sd(sigma: float, bits: int, *, halve: bool = False) -> float:
    """The actual sd √S·2^-bits of :func:`_noise` (≥ σ, or σ/√2 with ``halve``): what the
    centre's plausibility check uses."""
    base = lattice_variance(float(sigma), int(bits))
    if halve:
        base = -(-base // 2)
    return math.sqrt(_round_to_scale(base + SMOOTHING_VARIANCE)) * 2.0 ** -int(bits)


def _diag_positions(p: int) -> NDArray[np.intp]:
    """Positions of the diagonal in the row-major upper triangle (np.triu_indices order)."""
    j = np.arange(p)
    return np.asarray(j * p - j * (j - 1) // 2, dtype=np.intp)


def unpack_moments(flat: NDArray[np.float64], p: int) -> NDArray[np.float64]:
    """The symmetric p×p matrix of an upper-triangle vector."""
    out = np.zeros((p, p))
    iu = np.triu_indices(p)
    out[iu] = flat
    return out + np.triu(out, 1).T


def js_factor(
    off_diagonal: NDArray[np.float64], n_noisy: int, noise_var: float
) -> float:
    """Positive-part James–Stein factor κ = max(0, 1 − n_noisy·noise_var/Σ v²) ∈ [0, 1].

    ``off_diagonal`` are the values v_jk (j < k) of a noisy symmetric matrix, ``n_noisy`` of
    them carry independent noise of the public variance ``noise_var`` (the others are exact).
    Σ v² − n_noisy·noise_var is the unbiased estimate of the off-diagonal signal energy, so
    κ·v is the shrinkage toward 0 that minimises the estimated squared error over the
    off-diagonal (Stein's estimator with one common factor). Post-processing."""
    energy = float(np.dot(off_diagonal, off_diagonal))
    if not energy > 0.0:
        return 0.0
    return float(min(1.0, max(0.0, 1.0 - n_noisy * float(noise_var) / energy)))


def fit_theta(
    sums: NDArray[np.float64],
    cells: NDArray[np.float64],
    moments: NDArray[np.float64],
    n_train: float,
    n1: float,
    moment_sd: float,
    zeros: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """θ̃ from the pooled noisy statistics (post-processing; module docstring).

    The minimiser of the regularised quadratic surrogate −θᵀĝ + θᵀ(M̂ + Λ)θ/8 with the
    w-block of M̂ replaced by its shrunk within-group scatter (Schur form):

        Ŝ = M̂_ww − M̂_wz M̂_zz⁻¹ M̂_zw,   ĝ_c = ĝ_w − M̂_wz M̂_zz⁻¹ ĝ_z,   z = (1, a),
        θ̃_w = 4 (diag Ŝ + κ·offdiag Ŝ + Λ)⁻¹ ĝ_c,   θ̃_z = M̂_zz⁻¹ (4ĝ_z − M̂_zw θ̃_w),

    with κ = :func:`js_factor` of the off-diagonal of Ŝ (noise variance σ_M,agg²/2 on each
    pair that is not a structural zero) and Λ = :data:`RIDGE_FACTOR`·σ_M,agg·√p·I (about
    half the spectral edge 2σ_M,agg·√(p/2)·√2 of the moments' noise matrix). With κ = 1 and
    Λ = 0 this is exactly the least-squares solution θ̃ = 4M̂⁻¹ĝ.

    Parameters
    ----------
    sums, cells, moments : the sums over sites of the released blocks (w units): sums
        (p, 3) = (G_0, G_1, V), cells (2, 2), moments the upper triangle (p(p+1)/2,).
    n_train : the pooled (public) number of training rows.
    n1 : the pooled noisy group-1 count (clipped to [1, n_train − 1]).
    moment_sd : σ_M,agg = sqrt(Σ_s σ_M,s²), the aggregate noise sd of a diagonal moment.
    zeros : (p, p) bool, optional
        Public structural zeros (:func:`structural_zeros`), set to 0 exactly.

    Returns
    -------
    ndarray of shape (p + 2,)
        θ̃ = (intercept, group, w coefficients).
    """
    p = sums.shape[0]
    B = unpack_moments(moments, p)
    n_pairs = p * (p - 1) // 2
    if zeros is not None:
        B[zeros] = 0.0
        n_pairs -= int(np.count_nonzero(np.triu(zeros, 1)))
    n_tr, n_1 = float(n_train), float(n1)
    Mzz = np.array([[n_tr, n_1], [n_1, n_1]])
    Mzw = np.stack([sums[:, 0] + sums[:, 1], sums[:, 1]])  # Σψ_z w: (1, a) rows
    ny = np.clip(cells, 0.0, None)
    gz = 0.5 * np.array([ny[:, 1].sum() - ny[:, 0].sum(), ny[1, 1] - ny[1, 0]])
    gw = 0.5 * sums[:, 2]  # Σ (y − 1/2) w
    K = np.linalg.solve(Mzz, Mzw)  # M_zz⁻¹ M_zw, (2, p)
    S = B - Mzw.T @ K
    S = 0.5 * (S + S.T)
    gc = gw - K.T @ gz
    # κ from the pairs that carry moment noise (not the structural zeros), applied to the
    # whole off-diagonal of Ŝ: a common shrinkage of the scatter toward its diagonal.
    noisy = ~np.eye(p, dtype=bool) if zeros is None else ~(zeros | np.eye(p, dtype=bool))
    iu = np.triu_indices(p, 1)
    kappa = js_factor(S[iu][noisy[iu]], n_pairs, 0.5 * float(moment_sd) ** 2)
    d = np.diag(S).copy()
    H = kappa * S
    lam = RIDGE_FACTOR * float(moment_sd) * math.sqrt(p)
    H[np.diag_indices(p)] = d + lam
    try:
        tw = 4.0 * np.linalg.solve(H, gc)
    except np.linalg.LinAlgError:
        tw = 4.0 * np.linalg.lstsq(H, gc, rcond=None)[0]
    tz = np.linalg.solve(Mzz, 4.0 * gz - Mzw @ tw)
    return np.asarray(np.concatenate([tz, tw]), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class ReleasedFedLinearFold(PlugInRule):
    """A released linear group score: η̃(x, a) = sigmoid(θ̃·(1, a, w(x)/r)) (public).

    Attributes
    ----------
    theta : ndarray of shape (p + 2,)
    pi : ndarray of shape (2,)
    tau : float
    numeric : ndarray of bool, shape (p,)
        Numeric columns of u(x) (centred at the box midpoint), one-hot columns False.
    radius : float
        The public L2 radius r.
    """

    theta: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: float
    numeric: NDArray[np.bool_]
    radius: float

    def decision_function(self, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """θ̃·ψ(x, a): the released linear score (post-processing)."""
        V = row_map(U, self.numeric, self.radius)
        t = self.theta
        return np.asarray(t[0] + t[1] * A.astype(np.float64) + V @ t[2:])

    def eta_at(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """η̃(x, a) (``grid`` unused; U is the public map u(x))."""
        m = self.decision_function(U, A)
        return np.asarray(0.5 * (1.0 + np.tanh(0.5 * m)))


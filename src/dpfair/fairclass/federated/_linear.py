"""FDP-Fair's linear group score: one round of noisy sufficient statistics per site.

``estimator="linear"`` replaces the kernel sums of round 1 by the sufficient statistics of
the quadratic (second-order Taylor at θ = 0) approximation of the logistic loss of the model

    η̃(x, a) = sigmoid(θ · ψ(x, a)),   ψ(x, a) = (1, a, w(x)),

where w(x) is the row map: numeric columns centred at the midpoint of their public box
and scaled by its half-width (so each lies in [−1, 1]), one-hot columns 0/1 over their
public category lists (:class:`~dpfair.fairclass._linear.FeatureMap`), the vector v(x)
then clipped to the L2 radius r and divided by r, so ‖w‖₂ ≤ 1. r is public ("box":
√(k + c), or a number) or, by default (``radius="auto"``), each site's own r_s released in
round 1 (below). Derivation, choice and proof: ``docs/proofs/fdp_linear.md``.

**Private radius (``radius="auto"``, per fold, before the statistics).** The site bins its
rows' computed norms ‖v‖ on CDP-Fair's public ladder r_j = r_box·2^(−j/8), j = 0..63
(:func:`norm_histogram`: an exact int64 histogram of 65 bins, L2 sensitivity √2 —
replacing one record moves one unit between two bins) and releases it plus exact discrete
Gaussian noise of sd ≥ σ_r per bin (:func:`private_radius`, lattice 2^-6): μ_r = √2/σ_r.
Its clip radius r_s is the isotonic noisy-median rung (:func:`choose_rung`,
post-processing); the statistics below are then computed in units of r_s (‖w‖ ≤ 1 again,
so the same sensitivities for every r_s) and r_s is sent in the signed round-1 message.
By adaptive composition μ₁² = μ_c² + μ_r² + μ_L², with μ_r² = radius_share·μ₁² (public,
in the setup): with f = radius_share/(1 − count_share), μ_L = μ_f·√(1 − f) and
σ_r = √2/(μ_f·√f) (:func:`linear_sigmas`).

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

**Centre (post-processing).** With per-site radii the centre first rewrites site s's
statistics in units of the common r̄ = exp(Σ n_s log r_s/Σ n_s) (:func:`reference_radius`):
sums·(r_s/r̄), moments·(r_s/r̄)², moment noise variance σ_M,s²·(r_s/r̄)⁴; the released
score clips rows at r̄. Sums over sites of the released statistics give
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
from dpfair.fairclass._linear import (
    RADIUS_LADDER_STEPS,
    RADIUS_QUANTILE,
    FeatureMap,
    radius_ladder,
)
from dpfair.fairclass._rule import PlugInRule
from dpfair.mechanisms import (
    GAUSSIAN_MAX_VARIANCE,
    SMOOTHING_VARIANCE,
    lattice_variance,
    sample_discrete_gaussian,
)
from dpfair.mechanisms import round_to_scale as _round_to_scale

__all__ = [
    "LINEAR_FUNCTION_SENSITIVITY",
    "LINEAR_LATTICE_BITS",
    "MAX_LINEAR_WIDTH",
    "RADIUS_SHARE",
    "SHARES",
    "SUMS_SENSITIVITY",
    "LinearSigmas",
    "ReleasedFedLinearFold",
    "centred_norms",
    "check_linear_noise",
    "choose_rung",
    "default_radius",
    "fit_theta",
    "js_factor",
    "ladder_rung",
    "lattice_rows",
    "linear_cell_stats",
    "linear_function_sensitivity",
    "linear_sigmas",
    "noise_sd",
    "noisy_histogram",
    "norm_bins",
    "norm_histogram",
    "numeric_mask",
    "private_radius",
    "radius_fraction",
    "radius_noise_variance",
    "reference_radius",
    "release_linear_stats",
    "resolve_radius",
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
#: σ_f of the site plan is σ_S = 2√2/(μ_f·√share_S): the "function sensitivity" 2√2/√share_S
#: (public radius; with ``radius="auto"`` see :func:`linear_function_sensitivity`).
LINEAR_FUNCTION_SENSITIVITY = SUMS_SENSITIVITY / math.sqrt(SHARES[0])
#: Default share of round 1's μ₁² spent on each site's private radius (``radius="auto"``):
#: the statistics' noise sds grow by 1/√(1 − f), f = share/(1 − count_share) (≈ 2% at the
#: default), while the noisy median of the row norms is already within a few ladder rungs
#: at the smallest site sizes of the benchmarks (``docs/proofs/fdp_linear.md`` §7).
RADIUS_SHARE = 0.04
#: Public choices of the radius besides a number.
RADIUS_CHOICES = ("auto", "box")
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


def resolve_radius(radius: Any, fmap: FeatureMap) -> float | str:
    """The setup's radius: ``"auto"`` (also for None: each site's private radius,
    :func:`private_radius`), ``"box"`` → :func:`default_radius` (no clipping), or a public
    number (:func:`check_radius`)."""
    if radius is None or (isinstance(radius, str) and radius == "auto"):
        return "auto"
    if isinstance(radius, str):
        if radius == "box":
            return default_radius(fmap)
        raise InvalidParameterError(
            f"radius={radius!r}: expected 'auto' (each site releases its own radius), 'box' "
            "(no clipping) or a public number."
        )
    return check_radius(radius, fmap)


def radius_fraction(radius_share: float, count_share: float) -> float:
    """f = radius_share/(1 − count_share): the radius release's share of μ_f² (round 1
    after the group count); 0 for a public radius (radius_share = 0)."""
    return float(radius_share) / (1.0 - float(count_share)) if radius_share else 0.0


def linear_function_sensitivity(fraction: float = 0.0) -> float:
    """2√2/√(share_S·(1 − f)): the plan's "function sensitivity" that makes σ_f = σ_S when a
    share f of μ_f² goes to the radius release (f = 0: :data:`LINEAR_FUNCTION_SENSITIVITY`)."""
    if fraction == 0.0:
        return LINEAR_FUNCTION_SENSITIVITY
    return SUMS_SENSITIVITY / math.sqrt(SHARES[0] * (1.0 - float(fraction)))


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


def centred_norms(U: NDArray[np.float64], numeric: NDArray[np.bool_]) -> NDArray[np.float64]:
    """‖v(x_i)‖₂ of the centred rows (before clipping), computed as :func:`row_map` does."""
    W = np.array(U, dtype=np.float64, copy=True)
    W[:, numeric] = 2.0 * W[:, numeric] - 1.0
    return np.asarray(np.sqrt(np.einsum("ij,ij->i", W, W)))


def reference_radius(radii: Any, rows: Any) -> float:
    """The centre's common radius r̄ = exp(Σ_s n_s·log r_s / Σ_s n_s) of one fold
    (post-processing of the released r_s): the statistics of site s are rescaled by
    r_s/r̄ and the released score clips rows at r̄. Equals r when every r_s = r."""
    r = np.asarray(radii, dtype=np.float64)
    w = np.asarray(rows, dtype=np.float64)
    if np.all(r == r[0]):
        return float(r[0])
    return float(np.exp(np.sum(w * np.log(r)) / np.sum(w)))


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
    σ_M; each off-diagonal moment has σ_M/√2. ``radius`` is σ_r of each bin of the noisy
    norm histogram (:func:`private_radius`; 0 when the radius is public: nothing
    released)."""

    sums: float
    cells: float
    moments: float
    radius: float = 0.0

    @property
    def mu_stats(self) -> float:
        """μ_L = sqrt(8/σ_S² + 2/σ_n² + 2/σ_M²) (module docstring)."""
        return math.sqrt(SUMS_SENSITIVITY**2 / self.sums**2 + 2.0 / self.cells**2
                         + 2.0 / self.moments**2)

    @property
    def mu_radius(self) -> float:
        """μ_r = √2/σ_r of the norm histogram (0 for a public radius)."""
        return math.sqrt(2.0) / self.radius if self.radius > 0 else 0.0

    @property
    def mu(self) -> float:
        """μ_f = sqrt(μ_r² + μ_L²): everything of round 1 but the group count."""
        return math.hypot(self.mu_radius, self.mu_stats)


#: The sds are inflated by this factor so that the few roundings in deriving them from
#: μ_f can only lower the spent μ (never raise it above the plan's).
_SIGMA_SLACK = 1.0 + 2.0**-40


def linear_sigmas(sigma_function: float, fraction: float = 0.0) -> LinearSigmas:
    """The sds from the plan's σ_f (each ≥ its exact value).

    With a share f of μ_f² on the radius (:func:`radius_fraction`; 0 for a public radius),
    the plan's σ_f = 2√2/(μ_f·√(share_S·(1 − f))) (:func:`linear_function_sensitivity`), so

        μ_L = μ_f·√(1 − f),  σ_S = 2√2/(μ_L√share_S) = σ_f,  σ_n = √2/(μ_L√share_n),
        σ_M = √2/(μ_L√share_M),  σ_r = √2/(μ_f·√f),

    and μ_r² + μ_L² = f·μ_f² + (1 − f)·μ_f² = μ_f² (all sds times 1 + 2^-40, so the
    roundings can only lower the spent μ)."""
    f = float(fraction)
    if not 0.0 <= f < 1.0:
        raise InvalidParameterError(f"fraction={fraction!r}: must lie in [0, 1).")
    mu_f = linear_function_sensitivity(f) / float(sigma_function)
    mu_l = mu_f * math.sqrt(1.0 - f)
    _s_sum, s_cell, s_mom = SHARES  # σ_S = σ_f by construction of the plan
    return LinearSigmas(
        sums=float(sigma_function) * _SIGMA_SLACK,
        cells=math.sqrt(2.0) / (mu_l * math.sqrt(s_cell)) * _SIGMA_SLACK,
        moments=math.sqrt(2.0) / (mu_l * math.sqrt(s_mom)) * _SIGMA_SLACK,
        radius=math.sqrt(2.0) / (mu_f * math.sqrt(f)) * _SIGMA_SLACK if f > 0 else 0.0,
    )


# ---------------------------------------------------------------------------- private radius
def norm_bins(norms: NDArray[np.float64], ladder: NDArray[np.float64]) -> NDArray[np.intp]:
    """b(x) = #{j : r_j ≥ ‖v(x)‖} ∈ {0, …, L} on the decreasing public ladder r_0 > … > r_{L-1}.

    Bin 0 holds norms above r_0 = r_box (only through rounding), bin b ∈ [1, L − 1] the
    norms in (r_b, r_{b−1}], bin L those ≤ r_{L−1}. A fixed function of one record's computed
    norm (whatever its last bits), so replacing one record moves one unit between two bins.
    """
    asc = np.asarray(ladder, dtype=np.float64)[::-1]
    below = np.searchsorted(asc, np.asarray(norms, dtype=np.float64), side="left")
    return np.asarray(asc.size - below, dtype=np.intp)


def norm_histogram(norms: NDArray[np.float64], ladder: NDArray[np.float64]) -> NDArray[np.int64]:
    """h_b = #{i : b(x_i) = b}, b = 0..L (exact int64; Σ_b h_b = n). Replace-one L2
    sensitivity √2: one count down, another up (0 if the bin is the same)."""
    b = norm_bins(norms, ladder)
    return np.bincount(b, minlength=np.asarray(ladder).size + 1).astype(np.int64)


def _isotonic(y: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """The weighted least-squares non-decreasing fit of y (pool adjacent violators)."""
    vals: list[float] = []
    wts: list[float] = []
    sizes: list[int] = []
    for yi, wi in zip(y.tolist(), w.tolist(), strict=True):
        vals.append(yi)
        wts.append(wi)
        sizes.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            wt = wts[-2] + wts[-1]
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / wt
            size = sizes[-2] + sizes[-1]
            del vals[-1], wts[-1], sizes[-1]
            vals[-1], wts[-1], sizes[-1] = v, wt, size
    return np.repeat(np.array(vals), sizes)


def choose_rung(noisy: NDArray[np.float64], n: int, quantile: float = RADIUS_QUANTILE) -> int:
    """The rung j* whose estimated count of norms above r_j is nearest to q·n (post-processing).

    h̃ is first projected onto Σ_b h_b = n (n public): ĥ = h̃ − (Σh̃ − n)/(L + 1), the
    least-squares estimate under iid noise; Â_j = Σ_{b ≤ j} ĥ_b then estimates
    A_j = #{‖v‖ > r_j} with variance ∝ (j + 1)(L − j). A_j is non-decreasing in j (the
    radii decrease), so Â is replaced by its weighted isotonic fit (weights 1/variance),
    which averages the random walk of the cumulative noise where A is flat (far from the
    median) — there the plain argmin would often pick a far rung at small sites. Then
    j* = argmin_j |Â_j − q·n| (the first, i.e. largest, radius on ties).
    """
    h = np.asarray(noisy, dtype=np.float64)
    n_bins = h.size
    h = h - (float(h.sum()) - float(n)) / n_bins
    above = np.cumsum(h)[:-1]  # Â_j, j = 0..L−1
    j = np.arange(n_bins - 1, dtype=np.float64)
    fit = _isotonic(above, n_bins / ((j + 1.0) * (n_bins - 1.0 - j)))
    return int(np.argmin(np.abs(fit - quantile * float(n))))


def radius_noise_variance(sigma: float) -> int:
    """The sampler's variance parameter S (units 2^-6) of each histogram bin: the least
    S ≥ ⌈σ_r²·4^6⌉ + smoothing on the sampler's scale (what :func:`private_radius` draws)."""
    return int(_noise_variance(sigma, CELL_BITS))


def private_radius(
    hist: NDArray[np.int64], box_radius: float, sigma: float, rng: np.random.Generator
) -> tuple[int, float]:
    """Each site's private clip radius: (j*, r_{j*}) from a noisy histogram of its row norms.

    ``hist`` is the exact :func:`norm_histogram` of the half's rows over CDP-Fair's public
    ladder r_j = r_box·2^(−j/8), j = 0..63 (:func:`dpfair.fairclass._linear.radius_ladder`).
    Released: h·2^6 + Z, Z exact discrete Gaussian N_ℤ(0, S) per bin with
    S = :func:`radius_noise_variance` ≥ σ_r²·4^6 (so sd ≥ σ_r in counts). Replacing one
    record moves one unit between two bins: L2 sensitivity √2, and the release is a shift
    of data-independent noise by at most √2·2^6/√S ≤ √2/σ_r in Mahalanobis norm, i.e.
    (√2/σ_r)-GDP (up to the discrete sampler's lattice slack, inside the site's plan). The
    rung is post-processing (:func:`choose_rung`: the noisy median); n = Σ_b h_b (the half's
    size) is public.
    """
    ladder = radius_ladder(box_radius)
    assert ladder.size == RADIUS_LADDER_STEPS and hist.size == ladder.size + 1
    noisy = noisy_histogram(hist, sigma, rng)
    j = choose_rung(noisy.astype(np.float64) / float(2**CELL_BITS), int(hist.sum()))
    return j, float(ladder[j])


def noisy_histogram(
    hist: NDArray[np.int64], sigma: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """h·2^6 + Z in units of 2^-6 (Z iid N_ℤ(0, S), S = :func:`radius_noise_variance`):
    the released histogram of :func:`private_radius`, an exact translate of
    data-independent noise."""
    z = sample_discrete_gaussian(radius_noise_variance(sigma), hist.shape, rng)
    return np.asarray(hist, dtype=np.int64) * 2**CELL_BITS + np.asarray(z, dtype=np.int64)


def ladder_rung(radius: float, box_radius: float) -> int | None:
    """The index j with r = r_j of the public ladder (relative tolerance 1e-12), or None."""
    ladder = radius_ladder(box_radius)
    hit = np.flatnonzero(np.abs(ladder - float(radius)) <= 1e-12 * ladder)
    return int(hit[0]) if hit.size else None


def _noise(
    sigma: float, bits: int, shape: Any, rng: np.random.Generator, *, halve: bool = False
) -> NDArray[np.int64]:
    """Exact discrete Gaussian N_ℤ(0, S) in units of 2^-bits with S ≥ σ²4^bits (or, with
    ``halve``, ≥ σ²4^bits/2 exactly: the off-diagonal moments) plus the smoothing variance,
    rounded up to the sampler's scale (the construction of the RFF and count releases)."""
    var = _noise_variance(sigma, bits, halve=halve)
    return np.asarray(sample_discrete_gaussian(var, shape, rng), dtype=np.int64)


def _noise_variance(sigma: float, bits: int, *, halve: bool = False) -> Any:
    """The sampler's variance parameter of :func:`_noise` (and of the radius histogram):
    ⌈σ²4^bits⌉ (halved, rounded up, with ``halve``) plus the smoothing variance, rounded up
    to the sampler's scale. A pure function of public numbers."""
    base = lattice_variance(float(sigma), int(bits))  # ⌈σ²4^bits⌉, σ read exactly
    if halve:
        base = -(-base // 2)
    return _round_to_scale(base + SMOOTHING_VARIANCE)


def check_linear_noise(sigmas: LinearSigmas, n_rows: int, *, private_radius: bool,
                       bits: int = LINEAR_LATTICE_BITS) -> None:
    """Refuse a linear round 1 the exact samplers cannot serve (public numbers only).

    Every variance parameter round 1 draws with (:func:`release_linear_stats`' three blocks
    and, with ``private_radius``, :func:`noisy_histogram`'s) must stay within the discrete
    Gaussian sampler's limit 2^104, and the statistics plus noise within the exact int64
    range of the lattice. The centre checks this when it writes a setup and a site when it
    parses one and again before it charges round 1, so a setup that cannot run is refused
    by name and costs no budget (THREATS rules 1 and 7).

    Raises
    ------
    InvalidParameterError
        Naming ``radius_share`` when only the radius release is out of range, else the
        site's budget (``epsilon``) or size.
    """
    if private_radius and _noise_variance(sigmas.radius, CELL_BITS) > GAUSSIAN_MAX_VARIANCE:
        raise InvalidParameterError(
            f"radius_share: the clip-radius release's noise sd {sigmas.radius:.6g} needs a "
            "discrete-Gaussian variance above the sampler's limit 2^104; raise radius_share "
            "(or the site's epsilon), or give a public radius."
        )
    for name, sigma, b, halve in (("sums", sigmas.sums, bits, False),
                                  ("cells", sigmas.cells, CELL_BITS, False),
                                  ("moments", sigmas.moments, 2 * bits, False),
                                  ("moments", sigmas.moments, 2 * bits, True)):
        if _noise_variance(sigma, b, halve=halve) > GAUSSIAN_MAX_VARIANCE:
            raise InvalidParameterError(
                f"epsilon: the linear {name}' noise sd {sigma:.6g} needs a discrete-Gaussian "
                "variance above the sampler's limit 2^104; raise the site's epsilon."
            )
    _check_int_range(sigmas, n_rows, bits)


def _check_int_range(sigmas: LinearSigmas, n_rows: int, bits: int) -> None:
    """Statistics of ``n_rows`` rows plus 64 noise sds must stay exact in int64."""
    big = max(sigmas.sums, sigmas.moments, sigmas.cells)
    if (n_rows + 64.0 * big) * 4.0**bits >= _INT_LIMIT:
        raise InvalidParameterError(
            f"release_linear_stats: N = {n_rows} rows with noise sd {big:g} exceed the exact "
            "int64 range of the lattice; use fewer rows per site or a larger budget."
        )


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
    _check_int_range(sigmas, n_rows, bits)
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
    return math.sqrt(_noise_variance(sigma, bits, halve=halve)) * 2.0 ** -int(bits)


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


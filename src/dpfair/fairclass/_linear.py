"""Step S1 for many features: a private logistic group score (objective perturbation).

The kernel estimate of :mod:`._model` lives on a grid of m^d nodes; beyond d ≈ 3 it does
not scale. This module releases instead a logistic model of η(x, a) = P(Y = 1 | X = x, A = a)

    η̃(x, a) = sigmoid(θ̃ · φ(x, a)),   φ(x, a) = (1, a, u(x)) / R,

where u(x) ∈ [0, 1]^k ⊕ one-hot blocks is the *public* feature map (numeric columns scaled
with their public bounds, categorical columns one-hot over their public category lists;
:class:`FeatureMap`) and R = sqrt(2 + k + c) (k numeric, c categorical columns) so that
‖φ‖₂ ≤ 1 for every possible record. The group enters as a feature. The released θ̃ is a
finite vector; predictions are post-processing (no data, no noise).

**Mechanism (objective perturbation; Chaudhuri, Monteleoni & Sarwate 2011; Kifer, Smith &
Thakurta 2012), released as executed (Iyengar et al. 2019, approximate-minima perturbation,
plus a lattice).** θ* = argmin_θ J(θ), J(θ) = Σ_i ℓ(θ; φ_i, y_i) + (Λ/2)‖θ‖² + bᵀθ with
the logistic loss ℓ = log(1 + exp(−(2y − 1)θᵀφ)), b ~ N(0, σ_b² I); the released θ̃ is a
binary64 approximation θ̂ of θ*, certified to within r, snapped to 2^-k·ℤ^p, plus exact
discrete Gaussian noise.

**Guarantee: (ε_J + ε_b + ε_out, δ_b + δ_out)-DP under replace-one neighbours** for the
released θ̃ = 2^-k·(K + Z) (below), with

    Λ = λζ² / (e^{ε_J} − 1),  λ = 1/4,   σ_b = 2ζ / u,  u = −a + sqrt(a² + 2ε_b),
    a = sqrt(2 ln(1/δ_b)),  ζ = 1 + 2^-40 (≥ the norm of any *computed* row φ).

*Step 1: the exact minimiser θ* (objective perturbation; real arithmetic, never computed).*
θ* = argmin J_b, b ~ N(0, σ_b² I) continuous. J is Λ-strongly convex, so θ* is unique and
b ↦ θ* is a bijection with inverse b_D(θ) = −∇L_D(θ) − Λθ (L_D the summed loss). The
density of θ* under D is p_D(θ) = ν(b_D(θ))·|det(∇²L_D(θ) + ΛI)| (ν the N(0, σ_b²I)
density). Replace record z by z′: (i) b_D′(θ) = b_D(θ) + v with v = ∇ℓ(θ; z) − ∇ℓ(θ; z′);
for the logistic loss ∇ℓ = ℓ′·φ with |ℓ′| ≤ 1 and ‖φ‖ ≤ ζ, so ‖v‖ ≤ 2ζ and v lies in the
fixed span P of {φ, φ′}. The Gaussian part of the log-ratio is (2⟨b, v⟩ + ‖v‖²)/(2σ_b²) in
absolute value ≤ 2ζ‖P b‖/σ_b² + 2ζ²/σ_b². ‖Pb‖²/σ_b² is χ² with ≤ 2 degrees of freedom,
exceeding 2 ln(1/δ_b) with probability ≤ δ_b; outside that event the part is
≤ u·a + u²/2 = ε_b. (ii) The Hessians differ by a rank-one term ℓ″φφᵀ − ℓ″′φ′φ′ᵀ with
0 ≤ ℓ″ ≤ λ = 1/4, so the determinant ratio lies in [1/(1 + λζ²/Λ), 1 + λζ²/Λ] (matrix
determinant lemma, smallest eigenvalue ≥ Λ), i.e. within e^{±ε_J}. Together: θ* is
(ε_J + ε_b, δ_b)-DP.

*Step 2: what is computed and released (approximate-minima perturbation; Iyengar et al.
2019, with a lattice release).* The code draws b̂ = snap(b) on 2^-k_b·ℤ^p (numpy's normal,
snapped: under the sampler assumption of ``docs/floating_point.md`` this is the rounding
of a continuous b, so ‖b − b̂‖₂ ≤ √p·2^-(k_b+1)), runs damped Newton on J_b̂, and stops
only when ‖∇J_b̂(θ̂)‖₂ ≤ γ = 2^-40·(n + Λ) holds **in exact arithmetic**
(:meth:`_Problem.certified_gradient`: exactly summed terms plus a rigorous bound on every
rounding; "Floating point" below). Then ‖∇J_b(θ̂)‖₂ ≤ γ + √p·2^-(k_b+1), and Λ-strong
convexity gives ‖θ̂ − θ*‖₂ ≤ r = (γ + √p·2^-(k_b+1))/Λ. The release is

    K = rint(2^k·clip(θ̂, −B, B)) ∈ ℤ^p,   θ̃ = 2^-k·(K + Z),   Z ~ N_ℤ(0, S)^p exactly,

(B = 2^(51−k); the integer sum and its scaling are exact). *Adaptive composition.* Given
θ* = θ, b = b_D(θ) is a function of (D, θ), hence so are b̂, θ̂ (the optimiser is
deterministic) and K: K = g(D, θ). For neighbours D, D′ and every θ, both θ̂'s lie within r
of the same θ (θ is the exact minimiser of J_{b_D(θ)} under D and of J_{b_D′(θ)} under D′),
clipping is 1-Lipschitz and rounding moves each coordinate by ≤ 1/2, so
‖g(D, θ) − g(D′, θ)‖₂ ≤ Δ = 2^{k+1}·r + √p lattice units. Adding the exact discrete
Gaussian N_ℤ(0, S)^p to an integer vector of L2 sensitivity Δ is (ε_out, δ_out)-DP for the
S of :func:`dpfair.mechanisms.discrete_gaussian.approx_dp_variance` (analytic Gaussian at
δ slightly below δ_out, plus the proven discrete slack). By adaptive basic composition
the pair (θ*, K + Z) is (ε_J + ε_b + ε_out, δ_b + δ_out)-DP, and θ̃ is post-processing
of it. The shares: ε_out = 2% of ε₁, δ_out = 2% of δ/2; γ is tiny (Newton converges
quadratically), so the output noise (σ ≈ 10^-5 in θ units on Adult) is negligible next to
the objective perturbation's.

*Floating point.* (a) Rows: u(x) ∈ [0, 1] exactly (clip) and one-hot entries are 0/1, so
the exact ‖(1, a, u)‖ ≤ R; fl(sqrt) and fl(x/R) round once each, so every computed row has
‖φ‖ ≤ (1 + u)/(1 − u) < ζ (u = 2^-53). The proof is about these computed rows (a fixed
map of one record) and the binary64 numbers Λ and b̂ themselves. (b) The certified
gradient: g_j = math.fsum of the computed terms −fl(φ_ij·s_iσ̂_i), fl(Λθ_j), b̂_j (correctly
rounded), with E ≥ ‖g − ∇J_b̂(θ̂)‖₂ from: the margin fl(φ_i·θ) (≤ γ_p Σ_j φ_ij|θ_j| for any
summation order; σ′ ≤ 1/4), σ̂ = 0.5·(1 + tanh(−m/2)) (≤ (T + 2)u with T = 6 the assumed ulp
error of numpy's tanh, the one platform assumption here, checked against 50-digit
arithmetic in the tests), the products, fl(Λθ_j) and fsum (≤ u times the magnitudes).
The check is (‖g‖ + E)(1 + 2^-19) ≤ γ, all norms and bounds computed with relative error
≤ 2^-20. (c) If the check is not met after the refinement steps (never observed; it would
need margins |φ|·|θ| beyond ~10^3), the fit raises and releases nothing; that abort is a
data-dependent event outside the guarantee. (d) The optimiser, its number of steps, and
θ̂'s low-order bits may depend on the data in any way — they enter the output only
through K, whose sensitivity is bounded above for every run. (n in γ is the public
number of rows of the whole data set, an upper bound on each fit's half.)

The group shares π̃ come, as for the kernel estimator, from the Gaussian group count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError, MissingPublicBoundError
from dpfair.fairclass._rule import PlugInRule
from dpfair.mechanisms import snap_to_lattice

__all__ = [
    "OUTPUT_SHARE",
    "FeatureMap",
    "LinearRelease",
    "LinearS1Plan",
    "ReleasedLinearFold",
    "fit_linear_release",
    "objective_perturbation_logistic",
    "plan_linear_s1",
]

#: Logistic loss: |ℓ′| ≤ 1 and 0 ≤ ℓ″ ≤ λ = 1/4. ζ bounds the norm of a *computed* design
#: row, ‖fl(x/R)‖₂ ≤ (1 + u)/(1 − u) < 1 + 2^-51 (module docstring); 1 + 2^-40 also absorbs
#: the few roundings in computing Λ and σ_b.
_ZETA = 1.0 + 2.0**-40
_LAMBDA = 0.25
#: Unit roundoff of binary64.
_U = 2.0**-53
#: Platform assumption (docs/floating_point.md): numpy's tanh is within this many ulps.
_TANH_ULPS = 6
#: Share of ε₁ (and of δ/2) paid for the lattice release of the certified minimiser.
OUTPUT_SHARE = 0.02
#: γ = 2^-40·(n + Λ): the certified bound on the exact gradient norm at θ̂.
_GAMMA_SCALE = 2.0**-40
#: Finest lattice 2^-k for θ̂ (with the clip box 2^(51−k), |K + Z| stays below 2^52).
_MAX_LATTICE_BITS = 35
#: Rows of one fit: n·u stays below 2^-23, which the error bounds use.
_MAX_ROWS = 2**30
#: Newton refinement steps with the exactly summed gradient.
_MAX_REFINE = 30


@dataclass(frozen=True)
class FeatureMap:
    """The public map from raw columns to u(x) ∈ [0, 1]^p (numeric scaled, one-hot).

    Parameters
    ----------
    bounds : sequence
        One entry per column: a (lo, hi) pair for a numeric column, None for a categorical
        column (listed in ``categories``).
    categories : mapping of column index to sequence
        Public category lists of the categorical columns.
    clip : bool
        Clip numeric values into their bounds instead of raising.
    """

    bounds: tuple[tuple[float, float] | None, ...]
    categories: Mapping[int, tuple[Any, ...]] = field(default_factory=dict)
    clip: bool = False

    @classmethod
    def build(
        cls,
        feature_bounds: Any,
        categories: Any,
        n_columns: int,
        feature_names: Sequence[str] | None = None,
        clip: bool = False,
    ) -> FeatureMap:
        """Validate the public description of every column (one clear error, nothing fitted)."""
        names = list(feature_names) if feature_names is not None else None

        def key_to_index(key: Any) -> int:
            if isinstance(key, str):
                if names is None or key not in names:
                    raise InvalidParameterError(
                        f"categories: column {key!r} is not a column of X (names: {names})."
                    )
                return names.index(key)
            if isinstance(key, (int, np.integer)) and 0 <= int(key) < n_columns:
                return int(key)
            raise InvalidParameterError(
                f"categories: key {key!r} is neither a column index in [0, {n_columns}) nor a "
                "column name of X."
            )

        cats: dict[int, tuple[Any, ...]] = {}
        if categories is not None:
            if not isinstance(categories, Mapping):
                raise InvalidParameterError(
                    "categories: expected a mapping {column: [public categories]}, e.g. "
                    "{'workclass': ['Private', 'State-gov', ...]}."
                )
            for key, vals in categories.items():
                idx = key_to_index(key)
                lst = tuple(vals)
                if len(lst) < 1 or len(set(lst)) != len(lst):
                    raise InvalidParameterError(
                        f"categories[{key!r}]: expected a non-empty list of distinct public "
                        "categories."
                    )
                cats[idx] = lst
        if feature_bounds is None:
            raise MissingPublicBoundError(
                "feature_bounds=None: a public (lo, hi) is required for every numeric column "
                "(None for the columns listed in categories); it cannot be taken from the data "
                "(min-max scaling leaks)."
            )
        fb = list(feature_bounds)
        if len(fb) != n_columns:
            raise InvalidParameterError(
                f"feature_bounds: {len(fb)} entries for {n_columns} columns; give (lo, hi) for "
                "each numeric column and None for each categorical one."
            )
        bounds: list[tuple[float, float] | None] = []
        for j, b in enumerate(fb):
            label = names[j] if names is not None else j
            if j in cats:
                if b is not None:
                    raise InvalidParameterError(
                        f"feature_bounds[{label!r}]: the column is categorical (listed in "
                        "categories); give None as its bound."
                    )
                bounds.append(None)
                continue
            if b is None:
                raise MissingPublicBoundError(
                    f"feature_bounds[{label!r}] is None but the column is not listed in "
                    "categories: give its public (lo, hi) or its public categories."
                )
            try:
                lo, hi = float(b[0]), float(b[1])
            except (TypeError, ValueError, IndexError):
                raise InvalidParameterError(
                    f"feature_bounds[{label!r}]={b!r}: expected a (lo, hi) pair of numbers."
                ) from None
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise InvalidParameterError(
                    f"feature_bounds[{label!r}]=({lo}, {hi}): need finite lo < hi."
                )
            bounds.append((lo, hi))
        return cls(tuple(bounds), cats, bool(clip))

    @property
    def n_numeric(self) -> int:
        return sum(b is not None for b in self.bounds)

    @property
    def n_categorical(self) -> int:
        return len(self.categories)

    @property
    def width(self) -> int:
        """p = number of numeric columns + total number of categories."""
        return self.n_numeric + sum(len(v) for v in self.categories.values())

    @property
    def norm_bound(self) -> float:
        """R with ‖(1, a, u)‖₂ ≤ R for every possible record."""
        return math.sqrt(2.0 + self.n_numeric + self.n_categorical)

    def transform(self, X: Any, names: Sequence[str] | None = None) -> NDArray[np.float64]:
        """u(X) of shape (n, p); raises on unknown categories or values outside bounds."""
        cols = _columns(X, len(self.bounds))
        n = len(cols[0]) if cols else 0
        out = np.zeros((n, self.width))
        pos = 0
        for j, b in enumerate(self.bounds):
            label = names[j] if names is not None else j
            col = cols[j]
            if b is not None:
                try:
                    v = np.asarray(col, dtype=np.float64)
                except (TypeError, ValueError):
                    raise InvalidDataError(
                        f"X column {label!r}: not numeric; list its public categories in "
                        "categories= to one-hot encode it."
                    ) from None
                if not np.all(np.isfinite(v)):
                    raise InvalidDataError(f"X column {label!r} contains NaN or inf.")
                lo, hi = b
                if not self.clip and (np.any(v < lo) or np.any(v > hi)):
                    raise InvalidDataError(
                        f"X column {label!r}: values outside the public bounds [{lo:g}, {hi:g}]; "
                        "fix the bounds (from outside knowledge) or pass clip=True."
                    )
                out[:, pos] = np.clip((v - lo) / (hi - lo), 0.0, 1.0)
                pos += 1
            else:
                cats = self.categories[j]
                lookup = {c: k for k, c in enumerate(cats)}
                vals = np.asarray(col, dtype=object)
                idx = _category_codes(vals, cats, lookup)
                if np.any(idx < 0):
                    bad = vals[np.flatnonzero(idx < 0)[0]]
                    raise InvalidDataError(
                        f"X column {label!r}: category {bad!r} is not in its public category "
                        f"list ({len(cats)} categories); add it to categories (public "
                        "knowledge) or map it to an existing category."
                    )
                out[np.arange(n), pos + idx] = 1.0
                pos += len(cats)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "bounds": [None if b is None else list(b) for b in self.bounds],
            "categories": {str(k): [str(c) for c in v] for k, v in self.categories.items()},
        }


def _category_codes(
    vals: NDArray[Any], cats: tuple[Any, ...], lookup: dict[Any, int]
) -> NDArray[np.int64]:
    """Position of every value in the public list, −1 if absent (hash lookups, O(n))."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is an optional dependency
        return np.array([lookup.get(c, -1) for c in vals.tolist()], dtype=np.int64)
    codes = pd.Categorical(vals, categories=list(cats)).codes
    return np.asarray(codes, dtype=np.int64)


def _columns(X: Any, n_cols: int) -> list[Any]:
    """Columns of X (pandas DataFrame, 2-D array or list of rows) as a list of 1-D arrays."""
    if hasattr(X, "iloc") and hasattr(X, "columns"):
        if X.shape[1] != n_cols:
            raise InvalidDataError(f"X has {X.shape[1]} columns; the model expects {n_cols}.")
        return [X.iloc[:, j].to_numpy() for j in range(n_cols)]
    arr = np.asarray(X, dtype=object)
    if arr.ndim != 2 or arr.shape[1] != n_cols:
        raise InvalidDataError(f"X has shape {arr.shape}; expected (n, {n_cols}).")
    if arr.shape[0] == 0:
        raise InvalidDataError("X is empty.")
    return [arr[:, j] for j in range(n_cols)]


def design(U: NDArray[np.float64], A: NDArray[Any], R: float) -> NDArray[np.float64]:
    """φ(x, a) = (1, a, u(x)) / R, rows of norm ≤ 1."""
    n = U.shape[0]
    return np.column_stack((np.ones(n), A.astype(np.float64), U)) / R


@dataclass(frozen=True)
class LinearS1Plan:
    """Noise of the linear S1 release: group count, objective perturbation, lattice release.

    Attributes
    ----------
    epsilon_count, delta_count, sigma_count : float
        The Gaussian group count ñ₁ (sensitivity 1).
    epsilon_jacobian, epsilon_noise, delta_noise, regulariser, sigma_b : float
        The objective perturbation of the *exact* minimiser θ*: ε_J (paid by Λ), ε_b and δ_b
        (paid by b ~ N(0, σ_b² I)).
    epsilon_output, delta_output : float
        The lattice release of the certified approximate minimiser (discrete Gaussian).
    n_rows, width : int
        Public bounds on the rows of one fit and the number p of coefficients.
    tolerance : float
        γ: the exact gradient norm ‖∇J(θ̂)‖₂ certified at the returned θ̂.
    radius : float
        r = (γ + √p·2^-(b_bits+1))/Λ ≥ ‖θ̂ − θ*‖₂.
    lattice_bits : int
        k: θ̂ is snapped to 2^-k·ℤ^p.
    b_bits : int
        b is snapped to 2^-b_bits·ℤ^p before the optimiser sees it.
    output_sensitivity : float
        Δ in lattice units: 2^{k+1}·r + √p (an upper bound, rounded up).
    output_variance : int
        S, the discrete Gaussian's variance parameter in lattice units².
    """

    epsilon_count: float
    delta_count: float
    sigma_count: float
    epsilon_jacobian: float
    epsilon_noise: float
    delta_noise: float
    regulariser: float
    sigma_b: float
    epsilon_output: float
    delta_output: float
    n_rows: int
    width: int
    tolerance: float
    radius: float
    lattice_bits: int
    b_bits: int
    output_sensitivity: float
    output_variance: int

    @property
    def box(self) -> float:
        """B = 2^(51−k): θ̂ is clipped to [−B, B]^p (1-Lipschitz) so K + Z stays exact."""
        return float(2.0 ** (51 - self.lattice_bits))

    @property
    def sigma_output(self) -> float:
        """√S·2^-k: the output noise's scale in θ units (for display)."""
        return math.sqrt(self.output_variance) * 2.0**-self.lattice_bits


def plan_linear_s1(
    epsilon: float,
    delta: float,
    *,
    n_rows: int,
    width: int,
    count_share: float = 0.1,
    output_share: float = OUTPUT_SHARE,
) -> LinearS1Plan:
    """Split S1's (ε₁, δ) by basic composition (module docstring).

    The Gaussian group count gets (count_share·ε₁, δ/2); the lattice release of the certified
    minimiser gets (output_share·ε₁, output_share·δ/2); the objective perturbation the rest:
    ε_J = 0.1·(1 − count_share)·ε₁ pays for the Jacobian (Λ = λζ²/(e^{ε_J} − 1)) and
    ε_b = the remainder, with δ_b = δ/2 − δ_out, for the Gaussian b.

    ``n_rows`` (an upper bound on the rows of one fit, e.g. the public n) and ``width`` (p,
    the number of coefficients) are public; they fix γ, the lattice and the output noise.
    """
    from dpfair.mechanisms import (
        analytic_gaussian_sigma,
        approx_dp_sigma_target,
        approx_dp_variance,
    )

    if not 0 < count_share < 1:
        raise InvalidParameterError(f"count_share={count_share!r}: must lie in (0, 1).")
    if not 0 < output_share < 0.5:
        raise InvalidParameterError(f"output_share={output_share!r}: must lie in (0, 0.5).")
    n, p = int(n_rows), int(width)
    if not 1 <= n <= _MAX_ROWS:
        raise InvalidParameterError(f"n_rows={n_rows!r}: expected 1 <= n_rows <= 2^30.")
    if p < 1:
        raise InvalidParameterError(f"width={width!r}: expected a positive number of columns.")
    eps_c = count_share * epsilon
    d_c = delta / 2.0
    # calibrated at δ_c(1 − 2^-40): the exact discrete count noise then holds (ε_c, δ_c)
    sigma_c = analytic_gaussian_sigma(eps_c, approx_dp_sigma_target(eps_c, d_c, 1), 1.0)
    eps_lr = epsilon - eps_c
    eps_j = 0.1 * eps_lr
    eps_out = output_share * epsilon
    eps_b = eps_lr - eps_j - eps_out
    d_out = output_share * delta / 2.0
    d_b = delta / 2.0 - d_out
    lam = _LAMBDA * _ZETA * _ZETA / math.expm1(eps_j)
    a = math.sqrt(2.0 * math.log(1.0 / d_b))
    # u = −a + sqrt(a² + 2ε_b), written without cancellation.
    u = 2.0 * eps_b / (a + math.sqrt(a * a + 2.0 * eps_b))
    sigma_b = 2.0 * _ZETA / u
    b_bits = int(min(max(41 - math.ceil(math.log2(8.0 * sigma_b + 1.0)), 0), 40))
    gamma = _GAMMA_SCALE * (n + lam)
    root_p = math.sqrt(p)
    radius = (gamma + root_p * 2.0 ** -(b_bits + 1)) / lam * (1.0 + 2.0**-30)
    k = int(min(max(math.ceil(math.log2(4.0 * root_p / radius)), 0), _MAX_LATTICE_BITS))
    sens_lat = (2.0 ** (k + 1) * radius + root_p) * (1.0 + 2.0**-30)
    # Discrete Gaussian on ℤ^p, (ε_out, δ_out): the continuous σ_c of the analytic Gaussian at
    # δ_c slightly below δ_out, plus the smoothing variance that bounds the discrete slack
    # (dpfair.mechanisms.discrete_gaussian).
    d_target = approx_dp_sigma_target(eps_out, d_out, p)
    sigma_theta = analytic_gaussian_sigma(eps_out, d_target, sens_lat * 2.0**-k)
    variance = approx_dp_variance(sigma_theta, k)
    return LinearS1Plan(
        eps_c, d_c, sigma_c, eps_j, eps_b, d_b, lam, sigma_b, eps_out, d_out, n, p, gamma,
        radius, k, b_bits, sens_lat, variance,
    )


@dataclass(frozen=True, eq=False)
class LinearRelease:
    """One private fit: the released θ̃ and, for tests and audits, how it was formed.

    ``theta`` = 2^-k·(K + Z) is the only released vector; ``theta_hat`` (the certified
    approximate minimiser) and ``lattice`` (K) are data-dependent and must not be published.
    """

    theta: NDArray[np.float64]
    theta_hat: NDArray[np.float64]
    lattice: NDArray[np.int64]
    noise: NDArray[np.int64]
    gradient_bound: float
    b: NDArray[np.float64]


def objective_perturbation_logistic(
    Phi: NDArray[np.float64],
    y: NDArray[Any],
    plan: LinearS1Plan | None,
    rng: np.random.Generator,
    *,
    ridge: float = 1.0,
) -> NDArray[np.float64]:
    """The released θ̃ (module docstring); ``plan=None``: the non-private ridge fit.

    The design is stored sparse (one-hot blocks: a handful of non-zeros per row), so one
    Hessian costs O(n·nnz_row²).
    """
    if plan is None:
        problem = _Problem.build(Phi, y, float(ridge), np.zeros(Phi.shape[1]))
        theta, _ = problem.minimise(1e-9 * (Phi.shape[0] + float(ridge)), None)
        return theta
    return fit_linear_release(Phi, y, plan, rng).theta


def fit_linear_release(
    Phi: NDArray[np.float64],
    y: NDArray[Any],
    plan: LinearS1Plan,
    rng: np.random.Generator,
) -> LinearRelease:
    """Draw b, certify ‖∇J_b̂(θ̂)‖₂ ≤ γ in exact arithmetic, release 2^-k(K + Z).

    Raises :class:`InvalidDataError` if the certificate cannot be reached (module docstring,
    "Floating point"); nothing is released then.
    """
    from dpfair.mechanisms import sample_discrete_gaussian

    n, p = Phi.shape
    if p != plan.width or n > plan.n_rows:
        raise InvalidParameterError(
            f"design of shape {Phi.shape}: the plan was made for width={plan.width} and at "
            f"most n_rows={plan.n_rows} rows; rebuild it with plan_linear_s1."
        )
    if np.any(Phi < 0) or not np.all(np.isfinite(Phi)):
        raise InvalidDataError("the design must be finite and non-negative (see design()).")
    b = snap_to_lattice(rng.normal(0.0, plan.sigma_b, size=p), plan.b_bits)
    problem = _Problem.build(Phi, y, plan.regulariser, b)
    theta_hat, bound = problem.minimise(1e-9 * (n + plan.regulariser), plan.tolerance)
    k = plan.lattice_bits
    box = plan.box
    lattice = np.rint(np.clip(theta_hat, -box, box) * 2.0**k).astype(np.int64)
    noise = np.asarray(sample_discrete_gaussian(plan.output_variance, p, rng), dtype=np.int64)
    total = np.clip(lattice + noise, -(2**52), 2**52)  # public clip: keeps the cast exact
    theta = total.astype(np.float64) * 2.0**-k
    return LinearRelease(theta, theta_hat, lattice, noise, float(bound), b)


@dataclass(frozen=True)
class _Problem:
    """J(θ) = Σ log(1 + exp(−s_i φ_i·θ)) + (Λ/2)‖θ‖² + bᵀθ on a sparse non-negative design."""

    S: Any  # CSR, rows φ_i
    St: Any  # CSR of the transpose
    Sc: Any  # CSC (per-column exact sums)
    s: NDArray[np.float64]
    lam: float
    b: NDArray[np.float64]

    @classmethod
    def build(
        cls, Phi: NDArray[np.float64], y: NDArray[Any], lam: float, b: NDArray[np.float64]
    ) -> _Problem:
        from scipy import sparse

        S = sparse.csr_matrix(Phi)
        s = 2.0 * np.asarray(y).astype(np.float64) - 1.0
        return cls(S, S.T.tocsr(), S.tocsc(), s, float(lam), np.asarray(b, dtype=np.float64))

    def objective(self, th: NDArray[np.float64]) -> float:
        m = self.s * (self.S @ th)
        return float(np.sum(np.logaddexp(0.0, -m)) + 0.5 * self.lam * th @ th + self.b @ th)

    def sigmoid(self, th: NDArray[np.float64]) -> NDArray[np.float64]:
        """σ(−m_i) = −ℓ′_i, m_i = s_i φ_i·θ, as 0.5·(1 + tanh(−m/2))."""
        m = self.s * (self.S @ th)
        return np.asarray(0.5 * (1.0 + np.tanh(-0.5 * m)))

    def gradient(self, th: NDArray[np.float64], sig: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(-(self.St @ (self.s * sig)) + self.lam * th + self.b)

    def hessian(self, sig: NDArray[np.float64]) -> NDArray[np.float64]:
        from scipy import sparse

        w = sig * (1.0 - sig)
        H = (self.St @ sparse.diags(w) @ self.S).toarray()
        return np.asarray(H + self.lam * np.eye(H.shape[0]))

    def certified_gradient(self, th: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
        """(g, E): g_j the correctly rounded sum of the computed terms of ∂J/∂θ_j and E ≥
        ‖g − ∇J(θ)‖₂ in exact arithmetic (module docstring, "Floating point").

        ∇J(θ)_j = −Σ_i φ_ij s_i σ(−m_i) + Λθ_j + b_j exactly, with φ_ij, Λ, b_j, θ_j the
        binary64 numbers used. Sources of error, each bounded: (1) fl(φ_i·θ) vs φ_i·θ,
        ≤ γ_q Σ_j |φ_ij θ_j| (any summation order, q = p non-zeros at most); σ′ ≤ 1/4; (2) the
        computed σ̂_i vs σ at the computed margin, ≤ (T + 2)u with T the assumed ulp error
        of tanh; (3) the products fl(φ_ij·s_iσ̂_i), ≤ u·φ_ij σ̂_i; (4) fl(Λθ_j), ≤ u|Λθ_j|;
        (5) math.fsum's correct rounding, ≤ u|g_j|. The bound is itself a sum of n
        non-negative terms, computed with relative error ≤ γ_n ≤ 2^-23 and inflated by
        1 + 2^-20.
        """
        p = th.size
        gq = p * _U / (1.0 - p * _U)
        sig = self.sigmoid(th)
        reach = self.S @ np.abs(th)  # Σ_j φ_ij|θ_j| (φ ≥ 0)
        e_sig = (_TANH_ULPS + 2) * _U + 0.25 * gq * reach * (1.0 + 2.0**-20) + 2.0**-1000
        w = self.s * sig
        lt = self.lam * th
        g = np.empty(p)
        Sc = self.Sc
        for j in range(p):
            lo, hi = int(Sc.indptr[j]), int(Sc.indptr[j + 1])
            rows = Sc.indices[lo:hi]
            prods = Sc.data[lo:hi] * w[rows]
            g[j] = math.fsum([*(-prods).tolist(), float(lt[j]), float(self.b[j])])
        # (+ n·2^-1074: products that underflow lose at most that much each.)
        err = (
            _U * (self.St @ sig) + self.St @ e_sig + _U * np.abs(lt) + _U * np.abs(g)
            + self.S.shape[0] * 2.0**-1074
        ) * (1.0 + 2.0**-20)
        return g, float(np.linalg.norm(err)) * (1.0 + 2.0**-20)

    def minimise(
        self, tol: float, certify: float | None
    ) -> tuple[NDArray[np.float64], float]:
        """Damped Newton to ‖fl(∇J)‖ ≤ tol; with ``certify`` = γ, then Newton refinement with
        the exactly summed gradient until ‖∇J(θ̂)‖₂ ≤ γ holds in exact arithmetic.

        Returns (θ̂, certified bound on ‖∇J(θ̂)‖₂, or nan without ``certify``).
        """
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):  # p × p solves: threads only contend
            theta = self._newton(np.zeros(self.S.shape[1]), tol)
            if certify is None:
                return theta, math.nan
            for _ in range(_MAX_REFINE):
                g, err = self.certified_gradient(theta)
                bound = (float(np.linalg.norm(g)) + err) * (1.0 + 2.0**-19)
                if bound <= certify:
                    return theta, bound
                theta = theta - np.linalg.solve(self.hessian(self.sigmoid(theta)), g)
        raise InvalidDataError(
            "estimator='linear': the perturbed logistic objective's minimiser could not be "
            f"certified to the public tolerance gamma = {certify:.3g} in {_MAX_REFINE} "
            "refinement steps (extremely large coefficients?). Nothing was released; rescale "
            "the public bounds or use estimator='kernel'."
        )

    def _newton(self, theta: NDArray[np.float64], tol: float) -> NDArray[np.float64]:
        value = self.objective(theta)
        for _ in range(100):
            sig = self.sigmoid(theta)
            grad = self.gradient(theta, sig)
            if float(np.linalg.norm(grad)) <= tol:
                break
            step = np.linalg.solve(self.hessian(sig), grad)
            # Backtracking on J (Armijo) keeps the iteration globally convergent.
            t = 1.0
            slope = float(grad @ step)
            while True:
                cand = theta - t * step
                v = self.objective(cand)
                if v <= value - 0.25 * t * slope or t < 1e-10:
                    break
                t *= 0.5
            theta, value = cand, v
        return theta


@dataclass(frozen=True, eq=False)
class ReleasedLinearFold(PlugInRule):
    """(θ̃, π̃, τ̂) of one fit with the linear estimator; same interface as ReleasedFold."""

    theta: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: float
    norm_bound: float

    def eta_at(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """η̃(x, a) = sigmoid(θ̃·φ(x, a)) (``grid`` unused; U is the public map u(x))."""
        m = design(U, A, self.norm_bound) @ self.theta
        return 0.5 * (1.0 + np.tanh(0.5 * m))

"""Step S1 for many features: a private logistic group score (objective perturbation).

The kernel estimate of :mod:`._model` lives on a grid of m^d nodes; beyond d ≈ 3 it does
not scale. This module releases instead a logistic model of η(x, a) = P(Y = 1 | X = x, A = a)

    η̃(x, a) = sigmoid(θ̃ · φ(x, a)),
    φ(x, a) = (c₀, c₀·a, v(x)·min(1, r/‖v(x)‖))·(1 − 2^-30)/R,   R = sqrt(2c₀² + r²),

where v(x) is the *public* feature map centred at the box midpoint (numeric columns scaled
with their public bounds to [−1, 1], categorical columns one-hot over their public category
lists; :class:`FeatureMap`, :class:`LinearDesign`), r the row radius (public, the box's
worst case r_box = sqrt(k + c), or an ε-DP median of the row norms, :func:`choose_radius`)
and c₀ = r/sqrt(k + c); rows longer than r are clipped onto radius r, so ‖φ‖₂ ≤ 1 for every
possible record. The group enters as a feature. The released θ̃ is a finite vector;
predictions and scores are post-processing (no data, no noise). (:func:`design`, the
uncentred map (1, a, u(x))/sqrt(2 + k + c) of the first version, is kept for callers.)

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
of it. The shares: ε_out = 2% of ε₁, δ_out = 2% of δ/2 (CDP-Fair's pipeline also gives
the group count 2% and ε_J 2% of the rest, :data:`LINEAR_COUNT_SHARE`, and ε_r = 4% to the
radius); γ is tiny (Newton converges quickly), so the output noise (σ ≈ 10^-5 in θ units
on Adult) is negligible next to the objective perturbation's.

*Floating point.* (a) Rows: v(x) is any computed vector (a fixed function of one record);
the computed norm n̂ = fl(sqrt(Σv²)) has relative error ≤ (p/2 + 2)u, and every entry of φ
is one or two correctly rounded products with fl(min(1, r/n̂)) and fl((1 − 2^-30)/R), so ‖φ‖
≤ (1 + (p/2 + 10)u)(1 − 2^-30) < 1 for p ≤ 2^20 (u = 2^-53; :meth:`LinearDesign.rows`;
:func:`fit_linear_release` refuses a design whose computed Σφ² exceeds 1 + 2^-41). The proof
is about these computed rows and the binary64 numbers Λ and b̂ themselves. (b) The certified
gradient: the terms t_ij = fl(φ_ij·s_iσ̂_i) of each coordinate are summed in blocks of 256
rows with a γ bound (:func:`_blocked_column_sums`, dense designs), or — sparse designs, and
whenever that bound does not certify — by an error-free split (:func:`_exact_column_sums`:
hi parts on a grid on which every partial sum is exact in any order, BLAS included; lo parts
with a γ_n bound), vectorised over all columns, and g_j = fl(fl(−Σt_ij + fl(Λθ_j)) + b̂_j),
with E ≥ ‖g − ∇J_b̂(θ̂)‖₂ from: the margin fl(φ_i·θ) (≤ γ_p Σ_j |φ_ij||θ_j| for any
summation order; σ′ ≤ 1/4), σ̂ = 0.5·(1 + tanh(−m/2)) (≤ (T + 2)u with T = 6 the assumed ulp
error of numpy's tanh, the one platform assumption here, checked against 50-digit arithmetic
in the tests), the products, the split's bound, fl(Λθ_j) and the two final additions (≤ γ₂
times the magnitudes). The check is (‖g‖ + E)(1 + 2^-19) ≤ γ, all norms and bounds computed
with relative error ≤ 2^-20. (c) If the check is not met after the refinement steps (never
observed; it would need margins |φ|·|θ| beyond ~10^3), the fit raises and releases nothing;
that abort is a data-dependent event outside the guarantee. (d) The optimiser, its number of
steps, and θ̂'s low-order bits may depend on the data in any way — they enter the output
only through K, whose sensitivity is bounded above for every run. (n in γ is the public
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
from dpfair.fairclass._validation import check_bound_width
from dpfair.mechanisms import snap_to_lattice

__all__ = [
    "LINEAR_COUNT_SHARE",
    "LINEAR_JACOBIAN_SHARE",
    "OUTPUT_SHARE",
    "RADIUS_SHARE",
    "FeatureMap",
    "LinearDesign",
    "LinearRelease",
    "LinearS1Plan",
    "ReleasedLinearFold",
    "choose_radius",
    "fit_linear_release",
    "objective_perturbation_logistic",
    "plan_linear_s1",
    "release_linear_fold",
]

#: Logistic loss: |ℓ′| ≤ 1 and 0 ≤ ℓ″ ≤ λ = 1/4. ζ bounds the norm of a *computed* design
#: row (≤ 1 for :meth:`LinearDesign.rows`, checked at fit; module docstring); 1 + 2^-40 also
#: absorbs the few roundings in computing Λ and σ_b.
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
            except (TypeError, ValueError, IndexError, OverflowError):
                raise InvalidParameterError(
                    f"feature_bounds[{label!r}]={b!r}: expected a (lo, hi) pair of numbers."
                ) from None
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise InvalidParameterError(
                    f"feature_bounds[{label!r}]=({lo}, {hi}): need finite lo < hi."
                )
            check_bound_width(label, lo, hi)
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

    @property
    def numeric_positions(self) -> NDArray[np.intp]:
        """Positions of the numeric columns in u(x) (the rest are one-hot entries)."""
        pos, out = 0, []
        for j, b in enumerate(self.bounds):
            if b is not None:
                out.append(pos)
                pos += 1
            else:
                pos += len(self.categories[j])
        return np.asarray(out, dtype=np.intp)

    def transform(self, X: Any, names: Sequence[str] | None = None) -> NDArray[np.float64]:
        """u(X) of shape (n, p); raises on unknown categories or values outside bounds."""
        if not self.categories and isinstance(X, np.ndarray) and X.dtype.kind in "fiu":
            return self._transform_numeric(np.asarray(X, dtype=np.float64), names)
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

    def _transform_numeric(
        self, X: NDArray[np.float64], names: Sequence[str] | None
    ) -> NDArray[np.float64]:
        """The all-numeric case, vectorised over columns (the same numbers as the loop)."""
        if X.ndim != 2 or X.shape[1] != len(self.bounds):
            raise InvalidDataError(f"X has shape {X.shape}; expected (n, {len(self.bounds)}).")
        if X.shape[0] == 0:
            raise InvalidDataError("X is empty.")
        box = np.asarray(self.bounds, dtype=np.float64)
        lo, hi = box[:, 0], box[:, 1]

        def label(j: int) -> Any:
            return names[j] if names is not None else j

        # whole-array passes (fast); per column only to name the culprit on an error
        g_mn, g_mx = float(X.min()), float(X.max())  # NaN and ±inf propagate
        if not (math.isfinite(g_mn) and math.isfinite(g_mx)):
            j = int(np.flatnonzero(~np.isfinite(X).all(axis=0))[0])
            raise InvalidDataError(f"X column {label(j)!r} contains NaN or inf.")
        inside = g_mn >= float(lo.max()) and g_mx <= float(hi.min())
        if not (self.clip or inside) and (bool((X < lo).any()) or bool((X > hi).any())):
            j = int(np.flatnonzero(((X < lo) | (X > hi)).any(axis=0))[0])
            raise InvalidDataError(
                f"X column {label(j)!r}: values outside the public bounds [{lo[j]:g}, "
                f"{hi[j]:g}]; fix the bounds (from outside knowledge) or pass clip=True."
            )
        out = X - lo
        out /= hi - lo
        if self.clip:  # inside the bounds fl(x − lo) ≤ fl(hi − lo): already in [0, 1]
            np.clip(out, 0.0, 1.0, out=out)
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
    """The uncentred map φ(x, a) = (1, a, u(x)) / R, rows of norm ≤ 1 (kept for callers of
    the box-scaled design; the CDP-Fair linear score uses :class:`LinearDesign`)."""
    n = U.shape[0]
    return np.column_stack((np.ones(n), A.astype(np.float64), U)) / R


#: Rows of the centred design are scaled by (1 − 2^-30)/R: the computed row norm then
#: stays ≤ 1 for up to 2^20 coefficients (module docstring, "Floating point" (a)).
_ROW_SHRINK = 1.0 - 2.0**-30
#: Largest number of coefficients of the centred design (the row-norm proof needs p·u ≪ 2^-30).
_MAX_WIDTH = 2**20
#: The public ladder of candidate radii: r_box·2^(−j/8), j = 0, …, 63.
RADIUS_LADDER_STEPS = 64
#: Share of S1's ε spent on the private row radius (``radius="auto"``).
RADIUS_SHARE = 0.04
#: The budget split of CDP-Fair's linear S1 (shares of ε₁ after the count): the group count
#: gets 2% and the Jacobian term ε_J 2% of the rest (a large regulariser Λ; measured on the
#: full Adult data and the many-feature synthetic design, benchmarks/fairclass_many_features.py).
LINEAR_COUNT_SHARE = 0.02
LINEAR_JACOBIAN_SHARE = 0.02
#: The private radius aims at this quantile of the row norms.
RADIUS_QUANTILE = 0.5
RADIUS_CHOICES = ("auto", "box")


@dataclass(frozen=True)
class LinearDesign:
    """The public centred design of the linear score: v(x), clipped to radius r, and φ.

    v(x) is u(x) with every numeric column centred at its public box midpoint and scaled by
    the half-width, z_j = 2u_j − 1 ∈ [−1, 1], and the one-hot entries as they are (0/1);
    ‖v‖₂ ≤ r_box = sqrt(k + c) for every possible record (k numeric, c categorical
    columns). The released score uses

        φ(x, a) = (c₀, c₀·a, v(x)·min(1, r/‖v(x)‖)) · (1 − 2^-30) / R,   R = sqrt(2c₀² + r²),

    so ‖φ‖₂ ≤ 1: rows with ‖v‖ > r are *clipped* (shrunk onto the sphere of radius r), a
    fixed map of one record once r is fixed. c₀ = r/sqrt(k + c), the size of an average
    coordinate of a row on that sphere, is the scale of the intercept and group columns.

    Attributes
    ----------
    numeric : tuple of int
        Positions of the numeric columns in u(x).
    width_u : int
        Number of columns of u(x).
    radius : float
        r (public or an ε-DP release, :func:`choose_radius`).
    """

    numeric: tuple[int, ...]
    width_u: int
    n_categorical: int
    radius: float

    @classmethod
    def for_map(cls, fmap: FeatureMap, radius: float) -> LinearDesign:
        """The design of a public feature map at radius r (0 < r)."""
        if fmap.width + 2 > _MAX_WIDTH:
            raise InvalidParameterError(
                f"the linear score supports at most {_MAX_WIDTH - 2} mapped columns; the "
                f"feature map has {fmap.width}."
            )
        r = float(radius)
        if not (math.isfinite(r) and r > 0):
            raise InvalidParameterError(f"radius={radius!r}: expected a positive number.")
        return cls(tuple(int(j) for j in fmap.numeric_positions), fmap.width,
                   fmap.n_categorical, r)

    @property
    def n_columns(self) -> int:
        """k + c: the number of raw columns (numeric plus categorical)."""
        return len(self.numeric) + self.n_categorical

    @property
    def box_radius(self) -> float:
        """r_box = sqrt(k + c) ≥ ‖v(x)‖ for every possible record."""
        return math.sqrt(self.n_columns)

    @property
    def intercept_scale(self) -> float:
        """c₀ = r / sqrt(k + c)."""
        return self.radius / math.sqrt(self.n_columns)

    @property
    def norm_bound(self) -> float:
        """R = sqrt(2c₀² + r²)."""
        c0 = self.intercept_scale
        return math.sqrt(2.0 * c0 * c0 + self.radius * self.radius)

    @property
    def width(self) -> int:
        """p = 2 + columns of u(x)."""
        return self.width_u + 2

    def to_dict(self) -> dict[str, Any]:
        return {"centred": True, "radius": self.radius,
                "intercept_scale": self.intercept_scale, "norm_bound": self.norm_bound}

    def centred(self, U: NDArray[np.float64]) -> NDArray[np.float64]:
        """v(x): numeric columns 2u − 1 ∈ [−1, 1], one-hot entries unchanged (a new array)."""
        if len(self.numeric) == U.shape[1]:
            V = np.multiply(np.asarray(U, dtype=np.float64), 2.0)
            V -= 1.0
            return np.asarray(V)
        V = np.array(U, dtype=np.float64, copy=True)
        if self.numeric:
            idx = np.asarray(self.numeric, dtype=np.intp)
            V[:, idx] = 2.0 * V[:, idx] - 1.0
        return V

    def row_norms(self, U: NDArray[np.float64]) -> NDArray[np.float64]:
        """The computed ‖v(x_i)‖₂ of every row (a fixed function of one record)."""
        return self.centred_rows(U)[1]

    def centred_rows(
        self, U: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(v(x_i), ‖v(x_i)‖₂) of every row."""
        V = self.centred(U)
        return V, np.sqrt(np.einsum("ij,ij->i", V, V))

    def _shrink(
        self, V: NDArray[np.float64], norms: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """Per row: fl(min(1, r/‖v‖)·(1 − 2^-30)/R), the factor of the clipped, scaled row."""
        if norms is None:
            norms = np.sqrt(np.einsum("ij,ij->i", V, V))
        r = self.radius
        with np.errstate(divide="ignore"):
            factor = np.where(norms > r, r / norms, 1.0)
        return np.asarray(factor * (_ROW_SHRINK / self.norm_bound))

    def rows(
        self, U: NDArray[np.float64], A: NDArray[Any], *,
        centred: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    ) -> NDArray[np.float64]:
        """φ(x_i, a_i) of every row, shape (n, p); ‖φ‖₂ ≤ 1 as computed.

        ``centred``: (v, ‖v‖) of these rows if already computed (:meth:`centred_rows`).
        """
        V, norms = self.centred_rows(U) if centred is None else centred
        shrink = self._shrink(V, norms)
        out = np.empty((V.shape[0], self.width))
        c0 = self.intercept_scale * (_ROW_SHRINK / self.norm_bound)
        out[:, 0] = c0
        out[:, 1] = np.asarray(A, dtype=np.float64) * c0
        np.multiply(V, shrink[:, None], out=out[:, 2:])
        return out

    def logits(
        self, U: NDArray[np.float64], A: NDArray[Any], theta: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """θ·φ(x_i, a_i) without forming φ: c₀'(θ₀ + a θ₁) + shrink_i·(v_i·θ_{2:})."""
        V = self.centred(U)
        shrink = self._shrink(V)
        c0 = self.intercept_scale * (_ROW_SHRINK / self.norm_bound)
        a = np.asarray(A, dtype=np.float64)
        return np.asarray(c0 * theta[0] + (c0 * a) * theta[1] + shrink * (V @ theta[2:]))


def radius_ladder(box_radius: float) -> NDArray[np.float64]:
    """The public candidate radii r_box·2^(−j/8), j = 0, …, 63 (decreasing)."""
    return float(box_radius) * 2.0 ** (-np.arange(RADIUS_LADDER_STEPS) / 8.0)


def radius_scores(norms: NDArray[np.float64], ladder: NDArray[np.float64]) -> NDArray[np.int64]:
    """d_j = |#{i : ‖v_i‖ > r_j} − ⌊q·n⌋|, integers of sensitivity 1 (replace-one)."""
    n = int(norms.size)
    above = n - np.searchsorted(np.sort(norms), ladder, side="right")
    target = math.floor(RADIUS_QUANTILE * n)
    return np.abs(above.astype(np.int64) - target)


def choose_radius(
    norms: NDArray[np.float64], box_radius: float, epsilon: float, rng: np.random.Generator
) -> float:
    """ε-DP row radius: the exponential mechanism on the public ladder, exactly sampled.

    Candidate r_j gets probability ∝ exp(−(ε/2)·d_j), d_j = |#{‖v_i‖ > r_j} − ⌊n/2⌋|
    (:func:`radius_scores`). Replacing one record moves each count, hence each d_j, by at
    most 1, so the choice is ε-DP (McSherry & Talwar 2007). The scores are integers and the
    candidates public; :func:`dpfair.mechanisms.choose_pieces` samples the law exactly (no
    floating-point slack), so ε holds as executed. n (the half's size) is public.
    """
    from dpfair.mechanisms import PieceMasses, choose_pieces, exact_rate

    ladder = radius_ladder(box_radius)
    d = radius_scores(norms, ladder)
    masses = PieceMasses.exact_floats(np.ones(ladder.size))
    j = int(choose_pieces(masses, d, exact_rate(epsilon, 1), rng)[0])
    return float(ladder[j])


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
    epsilon_radius : float
        ε of the private row radius (:func:`choose_radius`; 0 when r is public).
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
    epsilon_radius: float = 0.0

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
    radius_share: float = 0.0,
    jacobian_share: float = 0.1,
) -> LinearS1Plan:
    """Split S1's (ε₁, δ) by basic composition (module docstring).

    The Gaussian group count gets (count_share·ε₁, δ/2); the lattice release of the certified
    minimiser gets (output_share·ε₁, output_share·δ/2); the objective perturbation the rest:
    ε_J = jacobian_share·(1 − count_share)·ε₁ pays for the Jacobian (Λ = λζ²/(e^{ε_J} − 1)) and
    ε_b = the remainder, with δ_b = δ/2 − δ_out, for the Gaussian b.

    With ``radius_share`` > 0 the private row radius (:func:`choose_radius`, pure
    ε_r = radius_share·ε₁) is paid out of ε_b.

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
    if not 0 < jacobian_share < 0.5:
        raise InvalidParameterError(
            f"jacobian_share={jacobian_share!r}: must lie in (0, 0.5)."
        )
    if not 0 <= radius_share < 0.5:
        raise InvalidParameterError(f"radius_share={radius_share!r}: must lie in [0, 0.5).")
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
    eps_j = jacobian_share * eps_lr
    eps_out = output_share * epsilon
    eps_r = radius_share * epsilon
    eps_b = eps_lr - eps_j - eps_out - eps_r
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
        radius, k, b_bits, sens_lat, variance, eps_r,
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

    A design with few non-zeros per row (one-hot blocks) is stored sparse; a dense design
    uses dense BLAS for margins, gradients and Hessians.
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

    Every row of ``Phi`` must have ‖φ‖₂ ≤ 1 as computed (:class:`LinearDesign` guarantees
    it; checked). Raises :class:`InvalidDataError` if the certificate cannot be reached
    (module docstring, "Floating point"); nothing is released then.
    """
    from dpfair.mechanisms import sample_discrete_gaussian

    n, p = Phi.shape
    if p != plan.width or n > plan.n_rows:
        raise InvalidParameterError(
            f"design of shape {Phi.shape}: the plan was made for width={plan.width} and at "
            f"most n_rows={plan.n_rows} rows; rebuild it with plan_linear_s1."
        )
    # fl(Σφ²) ≤ 1 + 2^-41 implies the exact ‖φ‖² ≤ (1 + 2^-41)(1 + γ_{p+1}) ≤ ζ²; a NaN or
    # ±inf entry makes its row's sum NaN or inf.
    sq = np.einsum("ij,ij->i", Phi, Phi)
    if not np.all(np.isfinite(sq)):
        raise InvalidDataError("the design must be finite (see LinearDesign.rows).")
    if float(np.max(sq, initial=0.0)) > 1.0 + 2.0**-41:
        raise InvalidParameterError(
            "the design has a row of norm above 1; build it with LinearDesign.rows."
        )
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


#: Below this share of non-zeros the design is stored sparse (CSR).
_SPARSE_DENSITY = 0.25
#: Rows of the Hessian sample: beyond twice this many rows, Newton steps use the Hessian of
#: an evenly spaced, fixed subset of this many rows (scaled to n); the iteration still
#: converges to the exact minimiser (the gradient is always the full one), only the step
#: is approximate (linear convergence at a rate of about sqrt(p/rows)).
_HESSIAN_ROWS = 16384


def _exact_column_sums(
    terms: NDArray[np.float64], cols: NDArray[np.intp] | None, p: int,
    *, bound: float | None = None, overwrite: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(s, e): s_j ≈ Σ_i t_ij with |s_j − Σ_i t_ij| ≤ e_j in exact arithmetic, vectorised.

    ``terms`` is an (n, p) array (``cols`` None) or the flat non-zeros of a sparse matrix
    with their column indices; ``bound`` ≥ max|t| if known (else computed); ``overwrite``
    lets the function reuse ``terms`` as scratch. Error-free split (Rump, Ogita & Oishi
    2008, ExtractVector): with K such that 2^K ≥ 2·m·max|t| (m terms) and C = 1.5·2^K,
    hi = fl(fl(C + t) − C) is t rounded to a multiple of 2^(K−52) (C + t stays in
    [2^K, 2^(K+1)), so the subtraction is exact by Sterbenz) and lo = t − hi is exact with
    |lo| ≤ 2^(K−53). Every partial sum of the hi parts is a multiple of 2^(K−52) of
    magnitude ≤ Σ|hi| < 2^K, so summing them is exact in *any* order (BLAS, pairwise,
    sequential). The lo parts are summed in binary64 with the bound γ_m·Σ|lo| ≤
    γ_m·m·2^(K−53) of any order; then s = fl(hi + lo) adds u·|s|. The returned e is
    computed with upward slack (× (1 + 2^-20)).
    """
    t = np.array(terms, dtype=np.float64, copy=not overwrite)  # scratch, overwritten below
    m = t.shape[0] if cols is None else t.size
    if m == 0:
        return np.zeros(p), np.zeros(p)
    amax = float(max(t.max(), -t.min())) if bound is None else float(bound)
    if amax == 0.0:
        return np.zeros(p), np.zeros(p)
    K = math.frexp(2.0 * m * amax)[1]  # 2^K > 2·m·max|t|
    C = 1.5 * 2.0**K
    hi = t + C
    hi -= C
    t -= hi  # lo = t − hi, exact
    if cols is None:
        sh, sl = hi.sum(axis=0), t.sum(axis=0)
    else:
        sh = np.bincount(cols, weights=hi, minlength=p)
        sl = np.bincount(cols, weights=t, minlength=p)
    # Σ|lo| ≤ m·2^(K−53) per column; any order of summation errs by ≤ γ_m of that.
    g = m * _U / (1.0 - m * _U)
    s = sh + sl
    e = (g * m * 2.0 ** (K - 53) + _U * np.abs(s)) * (1.0 + 2.0**-20) + 2.0**-1074
    return np.asarray(s), np.asarray(e)


#: Rows per block of :func:`_blocked_column_sums`.
_SUM_BLOCK = 256


def _blocked_column_sums(
    terms: NDArray[np.float64], abs_bound: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(s, e): column sums of an (m, p) array in two levels, |s − Σt| ≤ e exactly.

    Blocks of B = 256 rows are summed (any order: error ≤ γ_B·Σ|t| per block), then the
    ⌈m/B⌉ block sums (≤ γ_{⌈m/B⌉} of their absolute sum), so |s_j − Σ_i t_ij| ≤
    (γ_B + γ_M + γ_Bγ_M)·Σ_i |t_ij| ≤ that times ``abs_bound``_j (a caller's upper bound
    on Σ_i |t_ij|). One pass over the terms, against five for the exact split
    (:func:`_exact_column_sums`); the caller falls back to that when this bound is too
    coarse.
    """
    m, p = terms.shape
    full = (m // _SUM_BLOCK) * _SUM_BLOCK
    parts = terms[:full].reshape(-1, _SUM_BLOCK, p).sum(axis=1)
    if full < m:
        parts = np.vstack([parts, terms[full:].sum(axis=0)])
    s = parts.sum(axis=0)
    gb = _SUM_BLOCK * _U / (1.0 - _SUM_BLOCK * _U)
    k = parts.shape[0]
    gm = k * _U / (1.0 - k * _U)
    e = (gb + gm + gb * gm) * abs_bound * (1.0 + 2.0**-20) + 2.0**-1074
    return np.asarray(s), np.asarray(e)


@dataclass(frozen=True, eq=False)
class _Problem:
    """J(θ) = Σ log(1 + exp(−s_i φ_i·θ)) + (Λ/2)‖θ‖² + bᵀθ; dense or sparse design."""

    X: Any  # ndarray (dense) or CSR (sparse), rows φ_i
    Xt: Any  # dense: a C-contiguous copy of X.T (fast gemv); sparse: CSR of the transpose
    abs_colsum: NDArray[np.float64]  # ≥ Σ_i |φ_ij| in exact arithmetic (inflated)
    s: NDArray[np.float64]
    lam: float
    b: NDArray[np.float64]
    dense: bool
    hess_rows: NDArray[np.intp] | None  # the fixed Hessian sample (None: all rows)
    hess_X: Any  # the rows of the Hessian sample (X itself when hess_rows is None)

    @classmethod
    def build(
        cls, Phi: Any, y: NDArray[Any], lam: float, b: NDArray[np.float64]
    ) -> _Problem:
        from scipy import sparse

        if sparse.issparse(Phi):
            S = sparse.csr_matrix(Phi, dtype=np.float64)
            dense = False
        else:
            D = np.ascontiguousarray(Phi, dtype=np.float64)
            # storage only (any data-dependent choice is fine here): density of a row sample
            probe = D[:: max(1, D.shape[0] // 4096)]
            dense = bool(np.count_nonzero(probe) >= _SPARSE_DENSITY * probe.size)
            S = D if dense else sparse.csr_matrix(D)
        n = S.shape[0]
        s = 2.0 * np.asarray(y).astype(np.float64) - 1.0
        hess_rows = None
        if n > 2 * _HESSIAN_ROWS:
            hess_rows = np.linspace(0, n - 1, _HESSIAN_ROWS).astype(np.intp)
        hess_X = S if hess_rows is None else S[hess_rows]
        if dense:  # Fortran order: the symmetric rank-k update (dsyrk) reads it in place
            hess_X = np.asfortranarray(hess_X)
        bb = np.asarray(b, dtype=np.float64)
        # non-negative terms: the computed sum errs by ≤ γ_n ≤ 2^-23, covered by 1 + 2^-20
        if dense:
            colsum = np.abs(S).sum(axis=0) * (1.0 + 2.0**-20)
            return cls(S, np.ascontiguousarray(S.T), colsum, s, float(lam), bb, True,
                       hess_rows, hess_X)
        colsum = np.asarray(abs(S).sum(axis=0)).ravel() * (1.0 + 2.0**-20)
        return cls(S, S.T.tocsr(), colsum, s, float(lam), bb, False, hess_rows, hess_X)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def p(self) -> int:
        return int(self.X.shape[1])

    def margins(self, th: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(self.s * (self.X @ th))

    def objective(self, th: NDArray[np.float64]) -> float:
        m = self.margins(th)
        return float(np.sum(np.logaddexp(0.0, -m)) + 0.5 * self.lam * th @ th + self.b @ th)

    def sigmoid(self, th: NDArray[np.float64]) -> NDArray[np.float64]:
        """σ(−m_i) = −ℓ′_i, m_i = s_i φ_i·θ, as 0.5·(1 + tanh(−m/2))."""
        return np.asarray(0.5 * (1.0 + np.tanh(-0.5 * self.margins(th))))

    def gradient(self, th: NDArray[np.float64], sig: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(-(self.Xt @ (self.s * sig)) + self.lam * th + self.b)

    def hessian(self, sig: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σ σ(1 − σ)φφᵀ + ΛI; over the fixed row sample (scaled to n) when n is large."""
        from scipy import sparse

        w = sig * (1.0 - sig)
        X = self.hess_X
        if self.hess_rows is not None:
            w = w[self.hess_rows] * (self.n / self.hess_rows.size)
        if self.dense:
            from scipy.linalg.blas import dsyrk

            # XᵀWX as (W^½X)ᵀ(W^½X): half the flops of a general product (upper triangle)
            Hu = dsyrk(1.0, X * np.sqrt(w)[:, None], trans=1)
            H = np.triu(Hu) + np.triu(Hu, 1).T
        else:
            H = (X.T @ sparse.diags(w) @ X).toarray()
        return np.asarray(H + self.lam * np.eye(self.p))

    def certified_gradient(
        self, th: NDArray[np.float64], *, fine: bool = False
    ) -> tuple[NDArray[np.float64], float]:
        """(g, E): g ≈ ∇J(θ) and E ≥ ‖g − ∇J(θ)‖₂ in exact arithmetic (module docstring,
        "Floating point"), vectorised.

        ∇J(θ)_j = −Σ_i φ_ij s_i σ(−m_i) + Λθ_j + b_j exactly, with φ_ij, Λ, b_j, θ_j the
        binary64 numbers used. Sources of error, each bounded: (1) fl(φ_i·θ) vs φ_i·θ,
        ≤ γ_p Σ_j |φ_ij θ_j| (any summation order); σ′ ≤ 1/4; (2) the computed σ̂_i vs σ at
        the computed margin, ≤ (T + 2)u with T the assumed ulp error of tanh; (3) the
        products fl(φ_ij·s_iσ̂_i), ≤ u·|φ_ij|σ̂_i; (4) the column sums of those products,
        blocked (:func:`_blocked_column_sums`) or by the error-free split of
        :func:`_exact_column_sums`; (5) fl(Λθ_j) ≤ u|Λθ_j| and
        the two final additions, ≤ 2u(|sum| + |Λθ_j| + |b_j|) (γ₂). The bound is itself a
        sum of n non-negative terms, computed with relative error ≤ γ_n ≤ 2^-23 and
        inflated by 1 + 2^-20.

        Without ``fine``, (1) and (3) use the per-row maxima: Σ_j |φ_ij θ_j| ≤ ζ‖θ‖₂
        (Cauchy–Schwarz, ‖φ_i‖ ≤ ζ) and σ̂_i ≤ 1, times the column sums Σ_i |φ_ij| (one
        pass at build), and a dense design's column sums (4) are blocked
        (:func:`_blocked_column_sums`); ``fine`` sums the per-row bounds (|Φ|ᵀ of them) and
        uses the error-free split, for when the coarse bound does not certify.
        """
        p = self.p
        gq = p * _U / (1.0 - p * _U)
        sig = self.sigmoid(th)
        if fine:
            absX = np.abs(self.X) if self.dense else abs(self.X)
            reach = absX @ np.abs(th)  # ≥ Σ_j |φ_ij θ_j| up to γ_p (non-negative terms)
        else:
            absX = None
            reach = _ZETA * float(np.linalg.norm(th)) * (1.0 + 2.0**-20)
        e_sig = (_TANH_ULPS + 2) * _U + 0.25 * gq * reach * (1.0 + 2.0**-20) + 2.0**-1000
        w = self.s * sig
        if self.dense and not fine:
            # Σ_i |t_ij| ≤ (1 + u)·Σ_i |φ_ij| (σ̂ ≤ 1)
            colsum, e_sum = _blocked_column_sums(self.X * w[:, None],
                                                 self.abs_colsum * (1.0 + 2.0 * _U))
        elif self.dense:
            prods = self.X * w[:, None]
            # |φ_ij| ≤ 1 (checked at fit) and σ̂ ≤ 1, so every term has |t| ≤ 1
            colsum, e_sum = _exact_column_sums(prods, None, p, bound=1.0 + 2.0**-20,
                                               overwrite=True)
        else:
            X = self.X
            row_of = np.repeat(np.arange(self.n), np.diff(X.indptr))
            prods = X.data * w[row_of]
            colsum, e_sum = _exact_column_sums(prods, X.indices.astype(np.intp), p,
                                               bound=1.0 + 2.0**-20, overwrite=True)
        lt = self.lam * th
        g = (-colsum + lt) + self.b
        g2 = 2.0 * _U / (1.0 - 2.0 * _U)
        # (+ n·2^-1074: products that underflow lose at most that much each; the matrix
        # product of non-negative terms errs by ≤ γ_n ≤ 2^-23, covered by 1 + 2^-20.)
        if absX is not None:
            spread = absX.T @ (_U * sig + e_sig) * (1.0 + 2.0**-20)
        else:  # σ̂ ≤ 1 and e_sig is the same for every row
            spread = (_U + e_sig) * self.abs_colsum * (1.0 + 2.0**-20)
        err = (
            spread + e_sum + _U * np.abs(lt)
            + g2 * (np.abs(colsum) + np.abs(lt) + np.abs(self.b)) * (1.0 + 2.0**-20)
            + self.n * 2.0**-1074
        ) * (1.0 + 2.0**-20)
        return np.asarray(g), float(np.linalg.norm(err)) * (1.0 + 2.0**-20)

    def minimise(
        self, tol: float, certify: float | None
    ) -> tuple[NDArray[np.float64], float]:
        """Damped Newton to ‖fl(∇J)‖ ≤ tol; with ``certify`` = γ, then Newton refinement with
        the certified gradient until ‖∇J(θ̂)‖₂ ≤ γ holds in exact arithmetic.

        Returns (θ̂, certified bound on ‖∇J(θ̂)‖₂, or nan without ``certify``).
        """
        from threadpoolctl import threadpool_limits

        # one thread: the p × p solves and the sampled Hessian are small, and on a shared
        # machine BLAS threads only contend
        with threadpool_limits(limits=1):
            # Newton goes on to half the certified tolerance (far above binary64's noise
            # floor), so the exact check usually passes at once.
            theta = self._newton(np.zeros(self.p), tol if certify is None
                                 else min(tol, 0.5 * certify))
            if certify is None:
                return theta, math.nan
            for _ in range(_MAX_REFINE):
                for fine in (False, True):
                    g, err = self.certified_gradient(theta, fine=fine)
                    bound = (float(np.linalg.norm(g)) + err) * (1.0 + 2.0**-19)
                    if bound <= certify:
                        return theta, bound
                theta = theta - np.linalg.solve(self.hessian(self.sigmoid(theta)), g)
        raise InvalidDataError(
            "estimator='linear': the perturbed logistic objective's minimiser could not be "
            f"certified to the public tolerance gamma = {certify:.3g} in {_MAX_REFINE} "
            "refinement steps (extremely large coefficients?). Nothing was released; use a "
            "smaller radius or estimator='kernel'."
        )

    def _value(self, th: NDArray[np.float64], m: NDArray[np.float64]) -> float:
        """J(θ) from the margins m = s·(Xθ)."""
        return float(np.sum(np.logaddexp(0.0, -m)) + 0.5 * self.lam * th @ th + self.b @ th)

    def _newton(self, theta: NDArray[np.float64], tol: float) -> NDArray[np.float64]:
        """Newton steps with the (sampled) Hessian. A full step is taken when it lowers the
        gradient norm (no objective evaluated); otherwise Armijo backtracking on J from
        the current point, which keeps the iteration globally convergent."""
        m = self.margins(theta)
        sig = 0.5 * (1.0 + np.tanh(-0.5 * m))
        grad = self.gradient(theta, sig)
        gnorm = float(np.linalg.norm(grad))
        for _ in range(100):
            if gnorm <= tol:
                break
            step = np.linalg.solve(self.hessian(sig), grad)
            cand = theta - step
            mc = self.margins(cand)
            sc = 0.5 * (1.0 + np.tanh(-0.5 * mc))
            gc = self.gradient(cand, sc)
            gcn = float(np.linalg.norm(gc))
            if gcn < gnorm:
                theta, m, sig, grad, gnorm = cand, mc, sc, gc, gcn
                continue
            value = self._value(theta, m)
            slope = float(grad @ step)
            t = 0.5
            while True:
                cand = theta - t * step
                mc = self.margins(cand)
                v = self._value(cand, mc)
                if v <= value - 0.25 * t * slope or t < 1e-10:
                    break
                t *= 0.5
            if v >= value and t < 1e-10:
                break  # no further decrease in binary64: the refinement takes over
            theta, m = cand, mc
            sig = 0.5 * (1.0 + np.tanh(-0.5 * m))
            grad = self.gradient(theta, sig)
            gnorm = float(np.linalg.norm(grad))
        return theta


@dataclass(frozen=True, eq=False)
class ReleasedLinearFold(PlugInRule):
    """(θ̃, π̃, τ̂) of one fit with the linear estimator; same interface as ReleasedFold.

    ``design_map`` is the public (or ε-DP) centred design of the fit; without it the fold
    uses the uncentred map :func:`design` with ``norm_bound`` (folds made before it).
    """

    theta: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: float
    norm_bound: float
    design_map: LinearDesign | None = None

    def logit_at(self, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """θ̃·φ(x, a) (post-processing of the release: no data, no noise)."""
        if self.design_map is not None:
            return self.design_map.logits(U, A, self.theta)
        return np.asarray(design(U, A, self.norm_bound) @ self.theta)

    def eta_at(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """η̃(x, a) = sigmoid(θ̃·φ(x, a)) (``grid`` unused; U is the public map u(x))."""
        return np.asarray(0.5 * (1.0 + np.tanh(0.5 * self.logit_at(U, A))))


def release_linear_fold(
    U: NDArray[np.float64],
    A: NDArray[np.int8],
    y: NDArray[np.int8],
    fmap: FeatureMap,
    plan: LinearS1Plan | None,
    radius: float | str,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], LinearDesign]:
    """S1's logistic score on one training half: (θ̃, its design); draws from ``rng``.

    ``radius``: a public r > 0, ``"box"`` (r = r_box, no row is clipped) or ``"auto"``
    (r by :func:`choose_radius` with ε_r = ``plan.epsilon_radius``; without a plan, the
    exact median of the row norms — non-private). Then θ̃ by
    :func:`objective_perturbation_logistic` on the rows of :meth:`LinearDesign.rows`.
    """
    base = LinearDesign.for_map(fmap, 1.0)
    centred = base.centred_rows(U)  # v and ‖v‖ do not depend on r: computed once
    if radius == "box":
        r = base.box_radius
    elif radius == "auto":
        norms = centred[1]
        if plan is not None and plan.epsilon_radius > 0:
            r = choose_radius(norms, base.box_radius, plan.epsilon_radius, rng)
        else:
            ladder = radius_ladder(base.box_radius)
            r = float(ladder[int(np.argmin(radius_scores(norms, ladder)))])
    else:
        r = float(radius)
    dmap = LinearDesign.for_map(fmap, r)
    theta = objective_perturbation_logistic(dmap.rows(U, A, centred=centred), y, plan, rng)
    return theta, dmap

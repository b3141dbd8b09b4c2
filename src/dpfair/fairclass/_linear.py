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
Thakurta 2012).** θ̃ = argmin_θ J(θ), J(θ) = Σ_i ℓ(θ; φ_i, y_i) + (Λ/2)‖θ‖² + bᵀθ with the
logistic loss ℓ = log(1 + exp(−(2y − 1)θᵀφ)), b ~ N(0, σ_b² I).

**Guarantee: (ε_J + ε_b, δ_b)-DP under replace-one neighbours**, with

    Λ = λ / (e^{ε_J} − 1),  λ = 1/4,   σ_b = 2ζ / u,  u = −a + sqrt(a² + 2ε_b),
    a = sqrt(2 ln(1/δ_b)),  ζ = 1.

*Derivation.* J is Λ-strongly convex, so θ̃ is unique and b ↦ θ̃ is a bijection with inverse
b_D(θ) = −∇L_D(θ) − Λθ (L_D the summed loss). The density of θ̃ under D is
p_D(θ) = ν(b_D(θ))·|det(∇²L_D(θ) + ΛI)| (ν the N(0, σ_b²I) density). Replace record z by
z′: (i) b_D′(θ) = b_D(θ) + v with v = ∇ℓ(θ; z) − ∇ℓ(θ; z′); for the logistic loss
∇ℓ = ℓ′·φ with |ℓ′| ≤ 1 and ‖φ‖ ≤ 1, so ‖v‖ ≤ 2ζ and v lies in the fixed span P of {φ, φ′}.
The Gaussian part of the log-ratio is (2⟨b, v⟩ + ‖v‖²)/(2σ_b²) in absolute value
≤ 2ζ‖P b‖/σ_b² + 2ζ²/σ_b². ‖Pb‖²/σ_b² is χ² with ≤ 2 degrees of freedom, exceeding
2 ln(1/δ_b) with probability ≤ δ_b; outside that event the part is ≤ u·a + u²/2 = ε_b.
(ii) The Hessians differ by a rank-one term ℓ″φφᵀ − ℓ″′φ′φ′ᵀ with 0 ≤ ℓ″ ≤ λ = 1/4, so the
determinant ratio lies in [1/(1 + λ/Λ), 1 + λ/Λ] (matrix determinant lemma, ‖φ‖ ≤ 1,
smallest eigenvalue ≥ Λ), i.e. within e^{±ε_J}. Together: the privacy loss is ≤ ε_J + ε_b
except with probability δ_b, which gives (ε_J + ε_b, δ_b)-DP.

*Exact minimisation.* The guarantee is for the exact minimiser; the code runs Newton's
method with exact Hessians to a gradient norm below 1e-9·(n + Λ) (quadratic convergence:
the float minimiser), the usual caveat of objective perturbation implementations.

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

__all__ = [
    "FeatureMap",
    "LinearS1Plan",
    "ReleasedLinearFold",
    "objective_perturbation_logistic",
    "plan_linear_s1",
]

#: Logistic loss: |ℓ′| ≤ ζ = 1 and 0 ≤ ℓ″ ≤ λ = 1/4.
_ZETA = 1.0
_LAMBDA = 0.25


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
    """Noise of the linear S1 release: the group count and the objective perturbation."""

    epsilon_count: float
    delta_count: float
    sigma_count: float
    epsilon_jacobian: float
    epsilon_noise: float
    delta_noise: float
    regulariser: float
    sigma_b: float


def plan_linear_s1(epsilon: float, delta: float, *, count_share: float = 0.1) -> LinearS1Plan:
    """Split S1's (ε₁, δ) by basic composition: the Gaussian group count gets
    (count_share·ε₁, δ/2), the objective perturbation the rest, of which 10% pays for the
    Jacobian (Λ = λ/(e^{ε_J} − 1)) and 90% for the Gaussian b (σ_b from the module
    docstring)."""
    from dpfair.mechanisms import analytic_gaussian_sigma

    if not 0 < count_share < 1:
        raise InvalidParameterError(f"count_share={count_share!r}: must lie in (0, 1).")
    eps_c = count_share * epsilon
    d_c = delta / 2.0
    sigma_c = analytic_gaussian_sigma(eps_c, d_c, 1.0)
    eps_lr = epsilon - eps_c
    eps_j = 0.1 * eps_lr
    eps_b = eps_lr - eps_j
    d_b = delta / 2.0
    lam = _LAMBDA / math.expm1(eps_j)
    a = math.sqrt(2.0 * math.log(1.0 / d_b))
    u = -a + math.sqrt(a * a + 2.0 * eps_b)
    return LinearS1Plan(eps_c, d_c, sigma_c, eps_j, eps_b, d_b, lam, 2.0 * _ZETA / u)


def objective_perturbation_logistic(
    Phi: NDArray[np.float64],
    y: NDArray[Any],
    plan: LinearS1Plan | None,
    rng: np.random.Generator,
    *,
    ridge: float = 1.0,
) -> NDArray[np.float64]:
    """θ̃ = argmin Σ ℓ + (Λ/2)‖θ‖² + bᵀθ by damped Newton steps (module docstring).

    The design is stored sparse (one-hot blocks: a handful of non-zeros per row), so one
    Hessian costs O(n·nnz_row²). ``plan=None``: the non-private fit with ridge ``ridge``.
    """
    from scipy import sparse

    n, p = Phi.shape
    b: NDArray[np.float64]
    if plan is None:
        lam, b = float(ridge), np.zeros(p)
    else:
        lam = plan.regulariser
        b = np.asarray(rng.normal(0.0, plan.sigma_b, size=p), dtype=np.float64)
    S = sparse.csr_matrix(Phi)
    St = S.T.tocsr()
    s = 2.0 * y.astype(np.float64) - 1.0
    theta = np.zeros(p)
    tol = 1e-9 * (n + lam)
    eye = np.eye(p)

    def objective(th: NDArray[np.float64]) -> float:
        m = s * (S @ th)
        return float(np.sum(np.logaddexp(0.0, -m)) + 0.5 * lam * th @ th + b @ th)

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # p × p solves: threads only contend
        return _newton(S, St, s, lam, b, theta, tol, eye, objective)


def _newton(
    S: Any,
    St: Any,
    s: NDArray[np.float64],
    lam: float,
    b: NDArray[np.float64],
    theta: NDArray[np.float64],
    tol: float,
    eye: NDArray[np.float64],
    objective: Any,
) -> NDArray[np.float64]:
    from scipy import sparse

    value = objective(theta)
    for _ in range(100):
        m = s * (S @ theta)
        sig = 0.5 * (1.0 + np.tanh(-0.5 * m))  # sigmoid(−m) = −ℓ′
        grad = -(St @ (s * sig)) + lam * theta + b
        if float(np.linalg.norm(grad)) <= tol:
            break
        w = sig * (1.0 - sig)
        H = (St @ sparse.diags(w) @ S).toarray() + lam * eye
        step = np.linalg.solve(H, grad)
        # Backtracking on J (Armijo) keeps the iteration globally convergent.
        t = 1.0
        slope = float(grad @ step)
        while True:
            cand = theta - t * step
            v = objective(cand)
            if v <= value - 0.25 * t * slope or t < 1e-10:
                break
            t *= 0.5
        theta, value = cand, v
    return theta


@dataclass(frozen=True, eq=False)
class ReleasedLinearFold:
    """(θ̃, π̃, τ̂) of one fit with the linear estimator; same interface as ReleasedFold."""

    theta: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: float
    norm_bound: float

    def eta_at(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """η̃(x, a) = sigmoid(θ̃·φ(x, a)) (``grid`` unused; U is the public map u(x))."""
        m = design(U, A, self.norm_bound) @ self.theta
        return 0.5 * (1.0 + np.tanh(0.5 * m))

    def scores(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        """Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2)."""
        eta = self.eta_at(grid, U, A)
        sign = 2.0 * A.astype(np.float64) - 1.0
        return 2.0 * sign * self.pi[A.astype(np.intp)] * (eta - 0.5)

    def decide(self, grid: Any, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.int8]:
        """1{Z ≥ τ} for group 1 and 1{Z ≤ τ} for group 0 (paper Eq. 2)."""
        z = self.scores(grid, U, A)
        return np.where(A == 1, z >= self.tau, z <= self.tau).astype(np.int8)

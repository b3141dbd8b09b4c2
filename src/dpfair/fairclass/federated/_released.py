"""The released FDP-Fair model (:class:`FederatedModel`) and the certificate's verdict.

Kept apart from :mod:`dpfair.fairclass.federated._classifier` (the scikit-learn estimator)
so that the centre's ``finalize`` and ``dpfair fdp predict`` read a released model without
importing scikit-learn: predicting is post-processing of public numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair.fairclass._linear import FeatureMap
from dpfair.fairclass._model import ReleasedFold, row_uniforms
from dpfair.fairclass._rff import ReleasedRFFFold
from dpfair.fairclass._validation import check_sensitive, scale_to_unit_box
from dpfair.fairclass.federated._messages import Envelope, ProtocolError
from dpfair.fairclass.federated._opportunity import check_positive_shares, opportunity_folds
from dpfair.mechanisms import KroneckerGaussianGrid

__all__ = ["FederatedModel", "certified_from_thresholds", "uncertified_detail"]


@dataclass(frozen=True)
class _FoldCount:
    """What :func:`check_positive_shares` reads of a setup, for a released model."""

    n_folds: int
    is_opportunity: bool = True


def certified_from_thresholds(thresholds: Any) -> bool | None:
    """True/False when every fold used the confidence rule (all certified or not); None
    for the paper rule (no certificate is attempted)."""
    if not isinstance(thresholds, list) or not thresholds:
        return None
    if any(not isinstance(t, dict) or t.get("rule") != "confidence" for t in thresholds):
        return None
    return all(t.get("outcome") == "certified" for t in thresholds)


def uncertified_detail(thresholds: Any) -> str:
    parts = []
    for t in thresholds or ():
        if isinstance(t, dict) and t.get("outcome") == "uncertified":
            parts.append(
                f"fold {t.get('fold')}: upper envelope {float(t.get('upper_at_tau', 0.0)):+.3f}, "
                f"lower {float(t.get('lower_at_tau', 0.0)):+.3f}"
            )
    return ("; " + ", ".join(parts)) if parts else ""


@dataclass(frozen=True, eq=False)
class FederatedModel:
    """The released FDP-Fair classifier: public numbers only, no rows, no noise source.

    Built from a ``released_model`` message. :meth:`predict` is post-processing: the same
    input gives the same output; cross-fitted disagreements are settled by a deterministic
    hash of the row with the public salt ``tie_seed`` (as CDP-Fair).

    Attributes
    ----------
    feature_lows, feature_highs : ndarray of shape (d,)
    grid : KroneckerGaussianGrid or None
        The public grid (kernel estimator); None for random Fourier features.
    folds : tuple of ReleasedFold or ReleasedRFFFold
        (η̃ on the grid — or the aggregated feature sums and ridges —, π̃, τ̂) per fold.
    tie_seed : int
    info : dict
        The message's fields (threshold diagnostics, ω, each site's privacy report).
    feature_map : FeatureMap or None
        The public feature map of the rff estimator (numeric bounds, one-hot categories).
    """

    feature_lows: NDArray[np.float64]
    feature_highs: NDArray[np.float64]
    grid: Any  # KroneckerGaussianGrid (kernel) or None (rff)
    folds: tuple[Any, ...]  # ReleasedFold, ReleasedRFFFold or ReleasedFedLinearFold
    tie_seed: int
    info: dict[str, Any]
    feature_map: FeatureMap | None = None

    @classmethod
    def from_envelope(cls, env: Envelope) -> FederatedModel:
        """Validate a ``released_model`` message (under equal opportunity each fold is
        wrapped with the released p̃_{a,1}: ``federated/_opportunity.py``)."""
        if env.kind != "released_model":
            raise ProtocolError(env.sender, "kind", f"expected 'released_model', got {env.kind!r}.")
        if env.fields.get("estimator", "kernel") == "rff":
            model = cls._from_rff_envelope(env)
        elif env.fields.get("estimator", "kernel") == "linear":
            model = cls._from_linear_envelope(env)
        else:
            model = cls._from_kernel_envelope(env)
        opp = env.fields.get("constraints", "demographic_parity") == "equal_opportunity"
        if env.fields.get("constraints", "demographic_parity") not in (
                "demographic_parity", "equal_opportunity"):
            raise ProtocolError(env.sender, "fields.constraints", "unknown constraint.")
        if not opp:
            if "p_a1" in env.arrays:
                raise ProtocolError(env.sender, "arrays.p_a1",
                                    "an equal-opportunity array in a demographic-parity model.")
            return model
        positive = check_positive_shares(env, _FoldCount(len(model.folds)))
        return replace(model, folds=tuple(opportunity_folds(list(model.folds), positive)))

    @classmethod
    def _from_kernel_envelope(cls, env: Envelope) -> FederatedModel:
        """A released kernel-grid model: the grid, η̃ on it, π̃ and τ̂ per fold."""
        bounds = np.asarray(env.get("feature_bounds", list), dtype=np.float64)
        shape = tuple(int(g) for g in env.get("grid_shape", list))
        if bounds.ndim != 2 or bounds.shape != (len(shape), 2):
            raise ProtocolError(env.sender, "fields.feature_bounds", "does not match grid_shape.")
        h = env.number("bandwidth", positive=True)
        tau = env.array("tau")
        nf = tau.size
        eta = env.array("eta", (nf, *shape, 2))
        pi = env.array("pi", (nf, 2))
        grid = KroneckerGaussianGrid.uniform(len(shape), shape, length_scale=h)
        folds = tuple(ReleasedFold(eta=eta[k], pi=pi[k], tau=float(tau[k])) for k in range(nf))
        return cls(
            bounds[:, 0].copy(),
            bounds[:, 1].copy(),
            grid,
            folds,
            int(env.get("tie_seed", int)),
            dict(env.fields),
        )

    @classmethod
    def _from_rff_envelope(cls, env: Envelope) -> FederatedModel:
        """A released RFF model: the public feature map, frequencies and aggregated sums."""
        from dpfair.fairclass._rff import MAX_FEATURES_DIM, rff_frequencies

        raw_bounds = env.get("feature_bounds", list)
        raw_cats = env.get("categories", list)
        dim = env.get("features_dim", int)
        seed = env.get("rff_seed", int)
        if not (2 <= dim <= MAX_FEATURES_DIM and dim % 2 == 0):
            raise ProtocolError(env.sender, "fields.features_dim", "out of the public range.")
        try:
            cats = {int(c[0]): list(c[1]) for c in raw_cats}
            fmap = FeatureMap.build(raw_bounds, cats, len(raw_bounds))
        except (InvalidParameterError, TypeError, IndexError, ValueError) as exc:
            raise ProtocolError(env.sender, "fields.feature_bounds", str(exc)) from None
        h = env.number("bandwidth", positive=True)
        tau = env.array("tau")
        nf = tau.size
        coef = env.array("coef", (nf, dim, 2, 2))
        ridge = env.array("ridge", (nf, 2))
        pi = env.array("pi", (nf, 2))
        W = rff_frequencies(fmap.width, dim, h, seed)
        folds = tuple(
            ReleasedRFFFold(coef=coef[k], ridge=ridge[k], pi=pi[k], tau=float(tau[k]), freqs=W)
            for k in range(nf)
        )
        empty = np.zeros(0)
        return cls(
            empty, empty, None, folds, int(env.get("tie_seed", int)), dict(env.fields), fmap
        )

    @classmethod
    def _from_linear_envelope(cls, env: Envelope) -> FederatedModel:
        """A released linear model: the public feature map, radius and coefficients θ̃."""
        from dpfair.fairclass.federated._linear import (
            MAX_LINEAR_WIDTH,
            ReleasedFedLinearFold,
            check_radius,
            numeric_mask,
        )

        raw_bounds = env.get("feature_bounds", list)
        raw_cats = env.get("categories", list)
        auto = env.fields.get("radius") == "auto"  # per-fold common radius r̄ in the arrays
        try:
            cats = {int(c[0]): list(c[1]) for c in raw_cats}
            fmap = FeatureMap.build(raw_bounds, cats, len(raw_bounds))
            radius = None if auto else check_radius(env.number("radius", positive=True), fmap)
        except (InvalidParameterError, TypeError, IndexError, ValueError) as exc:
            raise ProtocolError(env.sender, "fields.feature_bounds", str(exc)) from None
        if fmap.width > MAX_LINEAR_WIDTH:
            raise ProtocolError(env.sender, "fields.categories", "over the public width limit.")
        tau = env.array("tau")
        nf = tau.size
        theta = env.array("theta", (nf, fmap.width + 2))
        pi = env.array("pi", (nf, 2))
        if auto:
            radii = env.array("radius", (nf,))
            try:
                radii = np.array([check_radius(float(r), fmap) for r in radii])
            except InvalidParameterError as exc:
                raise ProtocolError(env.sender, "arrays.radius", str(exc)) from None
        else:
            if "radius" in env.arrays:
                raise ProtocolError(env.sender, "arrays.radius",
                                    "a per-fold radius with a public radius field.")
            radii = np.full(nf, radius)
        mask = numeric_mask(fmap)
        folds = tuple(
            ReleasedFedLinearFold(theta=theta[k], pi=pi[k], tau=float(tau[k]), numeric=mask,
                                  radius=float(radii[k]))
            for k in range(nf)
        )
        empty = np.zeros(0)
        return cls(
            empty, empty, None, folds, int(env.get("tie_seed", int)), dict(env.fields), fmap
        )

    def decision_function(
        self, X: ArrayLike, A: ArrayLike, *, clip: bool = False
    ) -> NDArray[np.float64]:
        """The released linear score θ̃·(1, a, w(x)) averaged over folds (linear estimator
        only; post-processing of the release: rank or calibrate with it)."""
        from dpfair.fairclass.federated._linear import ReleasedFedLinearFold

        U, groups = self._prepare(X, A, clip)
        out = np.zeros(U.shape[0])
        for fold in self.folds:
            if not isinstance(fold, ReleasedFedLinearFold):
                raise InvalidParameterError(
                    "decision_function: only the linear estimator releases a linear score."
                )
            out += fold.decision_function(U, groups)
        return out / len(self.folds)

    def positive_rate(
        self, X: ArrayLike, A: ArrayLike, *, clip: bool = False
    ) -> NDArray[np.float64]:
        """P(Ŷ = 1) of the (cross-fitted, randomised) classifier per row."""
        U, groups = self._prepare(X, A, clip)
        votes = np.zeros(U.shape[0])
        for fold in self.folds:
            votes += fold.decide(self.grid, U, groups)
        return votes / len(self.folds)

    def predict(self, X: ArrayLike, A: ArrayLike, *, clip: bool = False) -> NDArray[np.int64]:
        """Labels 0/1, deterministic (no noise is drawn, no data is read)."""
        U, groups = self._prepare(X, A, clip)
        votes = np.zeros(U.shape[0])
        for fold in self.folds:
            votes += fold.decide(self.grid, U, groups)
        p = votes / len(self.folds)
        return (row_uniforms(U, groups, self.tie_seed) < p).astype(np.int64)

    def _prepare(
        self, X: ArrayLike, A: ArrayLike, clip: bool
    ) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        if self.feature_map is not None:
            fmap = replace(self.feature_map, clip=bool(clip))
            cols = getattr(X, "columns", None)
            U = fmap.transform(X, None if cols is None else [str(c) for c in cols])
            return U, check_sensitive(A, U.shape[0])
        try:
            arr = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidDataError("X: expected a numeric 2-D array.") from None
        if arr.ndim != 2 or arr.shape[1] != self.feature_lows.size:
            raise InvalidDataError(
                f"X has shape {arr.shape}; the model expects {self.feature_lows.size} features."
            )
        if not np.all(np.isfinite(arr)):
            raise InvalidDataError("X contains NaN or inf.")
        groups = check_sensitive(A, arr.shape[0])
        U = scale_to_unit_box(arr, self.feature_lows, self.feature_highs, clip=clip)
        return U, groups

"""CDP-Fair and its three baselines as scikit-learn classifiers.

All four share one pipeline (paper 003, Algorithm 5 and §5.2):

1. map X to [0, 1]^d with the public ``feature_bounds``;
2. split the rows at random into halves A and B (the split is independent of the data);
3. S1 on the training half: η̃_a on a public grid and π̃_a (private: Gaussian + Gaussian
   process noise; non-private: plain kernel estimates);
4. S2 on the calibration half: the fairness threshold τ (private: exponential mechanism on
   the exact DD step function; non-private: the exact argmin; unconstrained: τ = 0);
5. with ``cross_fit=True`` a second fit with the halves swapped; the classifier predicts 1
   with probability (f_1 + f_2)/2 (paper §5.1.1).

===========================  ======  =====  ===============================================
class                        DP      fair   paper name
===========================  ======  =====  ===============================================
CDPFairClassifier            yes     yes    CDP-Fair (Algorithm 5)
PrivatePlugInClassifier      yes     no     privacy-only baseline (S2 removed)
FairPlugInClassifier         no      yes    fairness-only baseline (Zeng et al. 2024)
PlugInClassifier             no      no     unconstrained group-wise plug-in
===========================  ======  =====  ===============================================
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError as SkNotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from dpfair._errors import InvalidDataError, InvalidParameterError, NotFittedError
from dpfair._rng import as_generator
from dpfair._validation import check_positive
from dpfair._warnings import UncertifiedFairnessWarning
from dpfair.fairclass._budget import BudgetPlan, plan_budget
from dpfair.fairclass._certify import (
    check_on_uncertified,
    refuse_uncertified,
    uncertified_message,
)
from dpfair.fairclass._linear import RADIUS_CHOICES, RADIUS_SHARE, FeatureMap
from dpfair.fairclass._model import bandwidth_rule, row_uniforms
from dpfair.fairclass._pipeline import ArraySource, FitSettings, Source, run_pipeline
from dpfair.fairclass._routing import SENSITIVE_REQUEST, require_sensitive
from dpfair.fairclass._rule import CONSTRAINTS
from dpfair.fairclass._split import SPLITS
from dpfair.fairclass._threshold import SCORE_LATTICE_BINS
from dpfair.fairclass._validation import (
    AUTO_KERNEL_MAX_D,
    check_alpha,
    check_binary,
    check_budget,
    check_feature_bounds,
    check_group_sizes,
    check_sensitive,
    scale_to_unit_box,
)
from dpfair.mechanisms import KroneckerGaussianGrid

__all__ = [
    "CDPFairClassifier",
    "FairPlugInClassifier",
    "PlugInClassifier",
    "PrivatePlugInClassifier",
]


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name}={value!r}: expected True or False.")
    return bool(value)


THRESHOLD_RULES = ("certified", "target")
ESTIMATORS = ("auto", "kernel", "linear")


def _positive_field(fold: Any) -> dict[str, Any]:
    """An equal-opportunity fold's released p̃_{a,1} (its score needs them), else nothing."""
    positive = getattr(fold, "positive", None)
    return {} if positive is None else {"positive": np.asarray(positive).tolist()}


def _uncertified_text(est: Any, state: dict[str, Any]) -> str:
    """The uncertified message of a fitted state (estimator's α and β, folds' checks)."""
    certs = state.get("certificates_") or ()

    def need(c: Any) -> str:
        lo, hi = c.interval
        if lo > hi:  # α below the margins: no released value certifies
            return (f"no DD certifies at this alpha (margins {c.margin_upper:.3f} / "
                    f"{c.margin_lower:.3f})")
        return f"needs DD in [{lo:+.3f}, {hi:+.3f}]"

    detail = "; " + ", ".join(
        f"fold {k + 1}: released DD {c.released_dd:+.3f}, {need(c)}"
        for k, c in enumerate(certs)
    )
    text = uncertified_message(float(est.alpha), float(est.fail_prob), detail)
    if getattr(est, "constraints", None) == "equal_opportunity":
        text = (text.replace("|DD|", "|EOD|").replace("released DD", "released EOD")
                .replace("needs DD", "needs EOD").replace("no DD", "no EOD"))
    return text


def _warn_if_uncertified(est: Any) -> None:
    if getattr(est, "certified_", None) is False:
        warnings.warn(
            _uncertified_text(est, {"certificates_": est.certificates_}),
            UncertifiedFairnessWarning,
            stacklevel=3,
        )


class _PlugInBase(ClassifierMixin, BaseEstimator):
    """Shared machinery; not public. Subclasses set the class flags and ``__init__``."""

    _private: ClassVar[bool] = False
    _fair: ClassVar[bool] = False

    # scikit-learn metadata routing: request the groups by default in every method that
    # takes them (a consumer's class-level default; set_<method>_request can override it).
    __metadata_request__fit: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__predict: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__predict_proba: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__decision_function: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__score: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST

    # Attributes every subclass defines in __init__ (declared for type checkers).
    feature_bounds: Any
    bandwidth: Any
    cross_fit: Any
    random_state: Any
    clip: Any
    grid_resolution: Any
    max_grid_nodes: Any

    # ------------------------------------------------------------------ sklearn plumbing
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.allow_nan = False
        tags.non_deterministic = self.random_state is None
        return tags

    # ------------------------------------------------------------------ hooks
    def _privacy_params(self) -> tuple[float, float] | None:
        return None

    def _alpha_params(self) -> tuple[float, float] | None:
        return None

    def _certify_fail_prob(self) -> float | None:
        """β of the certified threshold rule, or None (no certificate attempted)."""
        return None

    def _constraints(self) -> str:
        """The disparity S2 caps (``constraints``; demographic parity by default)."""
        value = getattr(self, "constraints", "demographic_parity")
        if value not in CONSTRAINTS:
            raise InvalidParameterError(
                f"constraints={value!r}: expected 'demographic_parity' (cap |P(Y^=1|A=1) - "
                "P(Y^=1|A=0)|) or 'equal_opportunity' (cap the true-positive-rate "
                "difference |P(Y^=1|A=1,Y=1) - P(Y^=1|A=0,Y=1)|)."
            )
        return str(value)

    def _on_uncertified(self) -> str:
        """``on_uncertified`` ("warn" by default)."""
        return check_on_uncertified(getattr(self, "on_uncertified", "warn"))

    def _cross_fit_flag(self) -> bool:
        return _check_bool("cross_fit", self.cross_fit)

    def _plan(self, eps: float, delta: float) -> BudgetPlan:
        """The budget split of a private estimator (overridden by the private ones)."""
        raise TypeError(
            f"{type(self).__name__} releases nothing privately, so it has no budget plan."
        )

    # ------------------------------------------------------------------ fit
    def _validate_common(self) -> tuple[bool, bool, float, int]:
        cross_fit = self._cross_fit_flag()
        clip = _check_bool("clip", self.clip)
        res = check_positive("grid_resolution", self.grid_resolution)
        max_nodes = self.max_grid_nodes
        if isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer)):
            raise InvalidParameterError(
                f"max_grid_nodes={max_nodes!r}: expected a positive integer."
            )
        return cross_fit, clip, res, int(max_nodes)

    def _resolve_bandwidth(self, n_train: int, d: int, mu_f: float | None) -> float:
        if self.bandwidth is None:
            return bandwidth_rule(n_train, d, mu_f)
        return self._public_bandwidth()

    def _public_bandwidth(self) -> float:
        """The caller's public bandwidth, validated (not None: the rule needs n)."""
        bw = self.bandwidth
        if isinstance(bw, str):
            raise InvalidParameterError(
                f"bandwidth={bw!r}: expected None (the public rule) or a positive number "
                "(in units of the unit box, i.e. a fraction of each feature's public range)."
            )
        h = check_positive("bandwidth", bw)
        if h > 10:
            raise InvalidParameterError(
                f"bandwidth={bw!r}: is in units of the unit box [0, 1]^d (a fraction of each "
                "feature's public range); values above 10 make the estimate constant."
            )
        return h

    def _prepare_X(self, X: Any, *, reset: bool, y: Any = None) -> Any:
        try:
            if reset:
                return validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True)
            return validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=True)
        except ValueError as exc:
            if isinstance(exc, InvalidDataError):
                raise
            raise InvalidDataError(str(exc)) from None

    def fit(
        self, X: ArrayLike, y: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> Any:
        """Fit on (X, y) with group labels ``sensitive_features``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features inside the public ``feature_bounds`` (or clipped with ``clip=True``).
        y : array-like of shape (n_samples,)
            Labels 0/1 (1 = the positive outcome whose rate the disparity compares).
        sensitive_features : array-like of shape (n_samples,)
            Group 0/1 of each row (A in the paper). Required: the default None only exists
            so that a call without it raises a clear error. Under scikit-learn's metadata
            routing (``sklearn.set_config(enable_metadata_routing=True)``) the estimator
            requests it by default, so ``cross_val_score(clf, X, y,
            params={"sensitive_features": A})`` and ``GridSearchCV(clf, grid).fit(X, y,
            sensitive_features=A)`` forward each fold's groups. Every fit is a release on
            its training rows: a grid of G settings over K folds spends G·K fits' budgets
            (see the model-selection page of the docs).

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            If ``sensitive_features`` is not passed.
        """
        sensitive_features = require_sensitive(sensitive_features, self, "fit")
        alpha = self._alpha_params()
        on_uncertified = self._on_uncertified()
        states = self._fit_path(X, y, sensitive_features, [alpha] if alpha else [None])
        refuse_uncertified(states[0], on_uncertified, lambda: _uncertified_text(self, states[0]))
        self._adopt(states[0])
        _warn_if_uncertified(self)
        return self

    def _adopt(self, state: dict[str, Any]) -> None:
        """Take a fitted state of the pipeline (the estimator owns its attributes)."""
        for key, value in state.items():
            setattr(self, key, value)

    def _split_kind(self) -> str | None:
        """The split kind of the fit (None: the source's default)."""
        return None

    def _radius(self) -> float | str:
        """The linear score's row radius: "auto", "box" or a public r > 0 (validated)."""
        r = getattr(self, "radius", "auto")
        if isinstance(r, str):
            if r in RADIUS_CHOICES:
                return r
        elif not isinstance(r, bool) and isinstance(r, (int, float, np.integer, np.floating)):
            if math.isfinite(float(r)) and float(r) > 0:
                return float(r)
        raise InvalidParameterError(
            f"radius={r!r}: expected 'auto' (an ε-DP estimate of the median row norm, "
            f"{RADIUS_SHARE:g} of S1's ε), 'box' (the public worst case sqrt(k + c): no row "
            "clipped) or a public positive number (the L2 radius of the centred row, in "
            "units of the public box: each numeric column spans [-1, 1], one-hot entries 1)."
        )

    def _settings(self, score: str, d: int, *, feature_map: FeatureMap | None = None,
                  lows: NDArray[np.float64] | None = None,
                  highs: NDArray[np.float64] | None = None) -> FitSettings:
        """The validated pipeline request of this estimator (no data read)."""
        priv = self._privacy_params()
        cross_fit, _clip, resolution, max_nodes = self._validate_common()
        plan = self._plan(*priv) if priv is not None else None
        return FitSettings(
            plan=plan, cross_fit=cross_fit, score=score, split=self._split_kind(),
            fail_prob=self._certify_fail_prob() if plan is not None else None,
            resolution=resolution, max_nodes=max_nodes, bandwidth=self._resolve_bandwidth,
            d=d, feature_map=feature_map, lows=lows, highs=highs,
            radius=self._radius() if score == "linear" else "auto",
            constraints=self._constraints(),
            calibration_share=self._calibration_share(cross_fit),
        )

    def _calibration_share(self, cross_fit: bool) -> float:
        """The calibration half's public share of the rows (½ unless asked otherwise)."""
        value = getattr(self, "calibration_share", 0.5)
        if isinstance(value, bool) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ) or not 0.1 <= float(value) <= 0.9:
            raise InvalidParameterError(
                f"calibration_share={value!r}: expected a public number in [0.1, 0.9], the "
                "calibration half's share of the rows (0.5: halves; more certifies a smaller "
                "alpha, less trains a better score; dpfair.fairclass.plan_certification "
                "predicts the effect)."
            )
        share = float(value)
        if share != 0.5 and cross_fit:
            raise InvalidParameterError(
                f"calibration_share={value!r} with cross_fit=True: cross-fitting swaps the "
                "halves, so they must be equal; use calibration_share=0.5 or cross_fit=False."
            )
        return share

    def check_params(self, n_features: int,
                     feature_names: Sequence[str] | None = None) -> str:
        """Run every check :meth:`fit` runs on the public parameters, reading no data.

        The same checks, in the same functions, as ``fit`` (estimator name and its
        resolution for ``n_features`` columns, budget, α, threshold rule and ``fail_prob``,
        shares, constraints, grid, bandwidth, radius, the public box or feature map,
        ``on_uncertified``): a caller that charges a budget before it reads the data (a
        :class:`~dpfair.Session`, the CLI) calls this first, so a typo in a public parameter
        costs nothing. Releases nothing.

        Parameters
        ----------
        n_features : int
            Columns of X (public).
        feature_names : sequence of str, optional
            Their names (``categories`` may name columns).

        Returns
        -------
        str
            The group score the fit will use ("kernel" or "linear").

        Raises
        ------
        InvalidParameterError
            The first public parameter out of range, named with its fix.
        """
        score = self._resolve_estimator(np.zeros((0, int(n_features))))
        self._alpha_params()
        self._on_uncertified()
        self._public_request(score, int(n_features), feature_names)
        return score

    def _public_request(
        self, score: str, d: int, feature_names: Sequence[str] | None = None
    ) -> tuple[FitSettings, FeatureMap | None, NDArray[np.float64] | None,
               NDArray[np.float64] | None, bool]:
        """The validated pipeline settings of a fit with ``d`` columns (no data read):
        (settings, feature map or None, lows, highs, clip)."""
        self._privacy_params()
        _cross, clip, _res, _nodes = self._validate_common()
        if score == "linear":
            fmap = FeatureMap.build(
                self.feature_bounds, getattr(self, "categories", None), d,
                None if feature_names is None else list(feature_names), clip,
            )
            return self._settings("linear", d, feature_map=fmap), fmap, None, None, clip
        lows, highs = check_feature_bounds(self.feature_bounds, d)
        if self.bandwidth is not None:
            self._public_bandwidth()
        return (self._settings("kernel", d, lows=lows, highs=highs), None, lows, highs,
                clip)

    def _fit_path(
        self,
        X: ArrayLike,
        y: ArrayLike,
        sensitive_features: ArrayLike,
        alphas: list[tuple[float, float] | None],
    ) -> list[dict[str, Any]]:
        """S1 once, then S2 once per (alpha, margin): one fitted state per entry.

        Each state is a complete, separately (ε, δ)-DP model (its S1 + its own S2 with fresh
        noise). Studies use this to sweep α without refitting S1; releasing several of them
        composes, which is why ``fit`` releases exactly one. The arrays become an
        :class:`~dpfair.fairclass._pipeline.ArraySource` of the one pipeline.
        """
        score = self._resolve_estimator(X)
        self._privacy_params()
        _cross, clip, _res, _nodes = self._validate_common()
        if score == "linear":
            try:
                X_obj = validate_data(self, X, reset=True, dtype=None, ensure_all_finite=False)
            except ValueError as exc:
                raise InvalidDataError(str(exc)) from None
            names = getattr(self, "feature_names_in_", None)
            n, ncols = X_obj.shape
            settings, fmap, _lo, _hi, _clip = self._public_request(
                "linear", ncols, None if names is None else list(names))
            assert fmap is not None
            yy = check_binary("y", y, n_samples=n)
            A = check_sensitive(sensitive_features, n)
            U = fmap.transform(X_obj, None if names is None else list(names))
            check_group_sizes(A, yy)
        else:
            X_arr, y_raw = self._prepare_X(X, reset=True, y=y)
            n, d = X_arr.shape
            yy = check_binary("y", y_raw, n_samples=n)
            A = check_sensitive(sensitive_features, n)
            settings, _fmap, lows, highs, _clip = self._public_request("kernel", d)
            assert lows is not None and highs is not None
            U = scale_to_unit_box(
                X_arr, lows, highs, clip=clip,
                feature_names=getattr(self, "feature_names_in_", None),
            )
            check_group_sizes(A, yy)
        rng = as_generator(self.random_state, name="random_state")
        return run_pipeline(settings, ArraySource(U, A, yy), alphas, rng).states

    # ------------------------------------------------------------------ group score
    def _resolve_estimator(self, X: Any) -> str:
        kind = getattr(self, "estimator", "kernel")
        if kind not in ESTIMATORS:
            raise InvalidParameterError(
                f"estimator={kind!r}: expected 'auto' (kernel grid for d <= "
                f"{AUTO_KERNEL_MAX_D} numeric features, else linear), 'kernel' or 'linear'."
            )
        cats = getattr(self, "categories", None)
        if kind == "kernel" and cats:
            raise InvalidParameterError(
                "categories: the kernel estimator needs numeric features on a grid; use "
                "estimator='linear' (or 'auto') for one-hot categorical columns."
            )
        if kind == "auto":
            d = int(np.shape(X)[1]) if np.ndim(X) == 2 else 0
            return "kernel" if (not cats and 1 <= d <= AUTO_KERNEL_MAX_D) else "linear"
        return str(kind)

    # ------------------------------------------------------------------ predict
    def _check_fitted(self) -> None:
        try:
            check_is_fitted(self, "folds_")
        except SkNotFittedError as exc:
            raise NotFittedError(str(exc)) from None

    def _prepare_predict(
        self, X: ArrayLike, sensitive_features: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        self._check_fitted()
        if getattr(self, "estimator_", "kernel") == "linear":
            try:
                X_obj = validate_data(self, X, reset=False, dtype=None, ensure_all_finite=False)
            except ValueError as exc:
                raise InvalidDataError(str(exc)) from None
            A = check_sensitive(sensitive_features, X_obj.shape[0])
            names = getattr(self, "feature_names_in_", None)
            return self.feature_map_.transform(X_obj, None if names is None else list(names)), A
        X_arr = self._prepare_X(X, reset=False)
        A = check_sensitive(sensitive_features, X_arr.shape[0])
        U = scale_to_unit_box(
            X_arr,
            self.feature_lows_,
            self.feature_highs_,
            clip=bool(self.clip),
            feature_names=getattr(self, "feature_names_in_", None),
        )
        return U, A

    def _positive_rate(self, U: NDArray[np.float64], A: NDArray[np.int8]) -> NDArray[np.float64]:
        grid: KroneckerGaussianGrid | None = self.grid_
        votes = np.zeros(U.shape[0])
        bins = self._score_lattice()
        for fold in self.folds_:
            votes += fold.decide(grid, U, A, bins)
        return votes / len(self.folds_)

    def _score_lattice(self) -> int | None:
        """B of the score lattice S2 ran on (public): the out-of-core ``score_bins``, else
        :data:`~dpfair.fairclass._threshold.SCORE_LATTICE_BINS`; None without a private
        S2 (no fairness threshold, or the exact non-private one: raw scores)."""
        if self._privacy_params() is None or self._alpha_params() is None:
            return None
        extras = getattr(self, "outofcore_", None)
        return int(extras.score_bins) if extras is not None else SCORE_LATTICE_BINS

    def predict_proba(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Probability with which the (cross-fitted, randomised) classifier outputs 0 and 1.

        With ``cross_fit=True`` the classifier is f = (f_1 + f_2)/2 (paper §5.1.1), so the
        second column is 0, 1/2 or 1. It is *not* an estimate of P(Y = 1 | X, A): use it for
        expected error and disparity (:mod:`dpfair.fairclass.metrics`).

        ``sensitive_features`` is required (requested by default under metadata routing);
        without it :class:`~dpfair.InvalidParameterError` is raised. Post-processing of the
        released model: no privacy cost.

        Returns
        -------
        ndarray of shape (n_samples, 2)
        """
        sensitive_features = require_sensitive(sensitive_features, self, "predict_proba")
        U, A = self._prepare_predict(X, sensitive_features)
        p = self._positive_rate(U, A)
        return np.column_stack((1.0 - p, p))

    def predict_eta(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """The released group score η̃(x, a), an estimate of P(Y = 1 | X = x, A = a).

        The mean over the folds of each fold's released η̃ (the linear score's
        sigmoid(θ̃·φ(x, a)), or the kernel estimate interpolated on its public grid). Use
        it to rank or calibrate; the fair decisions are :meth:`predict`.

        Privacy: post-processing of the released model (θ̃ or the η̃ grid, with the public
        feature map): it reads no training data and draws no noise, so it costs nothing
        beyond the fit's ``privacy_spent_``, and the same input always gives the same
        output. ``sensitive_features`` is required (η̃ depends on the group).

        Returns
        -------
        ndarray of shape (n_samples,), values in [0, 1]
        """
        sensitive_features = require_sensitive(sensitive_features, self, "predict_eta")
        U, A = self._prepare_predict(X, sensitive_features)
        grid = self.grid_
        eta = np.zeros(U.shape[0])
        for fold in self.folds_:
            eta += fold.eta_at(grid, U, A)
        return np.asarray(eta / len(self.folds_))

    def decision_function(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Margin of the fair decision: mean over folds of η̃_f(x, a) − t_{f,a}.

        Fold f predicts 1 iff η̃_f(x, a) ≥ t_{f,a} = 1/2 + (2a − 1)·τ̂_f / (2π̃_{f,a}) (the
        rule 1{Z ≥ τ̂} for group 1 and 1{Z ≤ τ̂} for group 0, Z = 2(2a − 1)π̃_a(η̃ − 1/2),
        solved for η̃), so with one fold the sign agrees with :meth:`predict` (up to
        rounding at exact ties). Post-processing of the released model: no training data,
        no noise, no privacy cost. ``sensitive_features`` is required.

        Returns
        -------
        ndarray of shape (n_samples,), values in [−1, 1]
        """
        sensitive_features = require_sensitive(sensitive_features, self, "decision_function")
        U, A = self._prepare_predict(X, sensitive_features)
        grid = self.grid_
        a = A.astype(np.intp)
        sign = 2.0 * a - 1.0
        out = np.zeros(U.shape[0])
        for fold in self.folds_:
            t = 0.5 + sign * fold.tau / (2.0 * fold.pi[a])
            out += fold.eta_at(grid, U, A) - t
        return np.asarray(out / len(self.folds_))

    def predict(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        """Predicted labels 0/1: a post-processing of the released model.

        Where the two cross-fitted classifiers disagree the prediction is a coin with
        probability 1/2, flipped *deterministically* from a hash of the row (same input, same
        output, however often it is called). No data are read and no noise is drawn.

        ``sensitive_features`` is required (requested by default under metadata routing);
        without it :class:`~dpfair.InvalidParameterError` is raised. scikit-learn's string
        scorers (``scoring="accuracy"``) call ``predict(X)`` without metadata, so in model
        selection keep the default scoring, :meth:`score`.
        """
        sensitive_features = require_sensitive(sensitive_features, self, "predict")
        U, A = self._prepare_predict(X, sensitive_features)
        p = self._positive_rate(U, A)
        if len(self.folds_) == 1:  # p is 0 or 1: u < p for every u in [0, 1) is p itself
            return p.astype(np.int64)
        u = row_uniforms(U, A, self.tie_seed_)
        return (u < p).astype(np.int64)

    def score(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sensitive_features: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> float:
        """Accuracy of :meth:`predict` (needs the groups, like ``predict``).

        ``sensitive_features`` is required; under metadata routing it is requested by default
        (``sample_weight`` is not: request it with ``set_score_request``). Without routing
        ``cross_val_score(clf, X, y, params={"sensitive_features": A})`` forwards the groups
        to ``fit`` only, this method then raises :class:`~dpfair.InvalidParameterError`, and
        scikit-learn's default ``error_score=np.nan`` turns that error into a NaN score with a
        ``UserWarning`` ("Scoring failed ...") carrying this message. Enable routing, and pass
        ``error_score="raise"`` so no failure is ever reported as a NaN score.
        """
        sensitive_features = require_sensitive(sensitive_features, self, "score")
        pred = self.predict(X, sensitive_features=sensitive_features)
        truth = check_binary("y", y, n_samples=pred.size)
        hit = (pred == truth).astype(np.float64)
        if sample_weight is None:
            return float(hit.mean())
        w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
        return float(np.sum(hit * w) / np.sum(w))

    # ------------------------------------------------------------------ summaries
    def export_released_model(self) -> dict[str, Any]:
        """The released model as plain numbers and lists (JSON-ready; no training rows).

        Everything a prediction needs: the public feature box and grid, and per fit the
        released η̃ grid, π̃ and τ̂ — all differentially private releases or public inputs.
        """
        self._check_fitted()
        spent = self.privacy_spent_
        if getattr(self, "estimator_", "kernel") == "linear":
            return {
                "format": "dpfair.fairclass.released_model/1",
                "estimator": type(self).__name__,
                "group_score": "linear",
                "params": {
                    k: v for k, v in self.get_params().items() if k not in ("random_state",)
                },
                "feature_map": self.feature_map_.to_dict(),
                "folds": [
                    {"theta": f.theta.tolist(), "pi": f.pi.tolist(), "tau": f.tau,
                     "design": None if f.design_map is None else f.design_map.to_dict(),
                     **_positive_field(f)}
                    for f in self.folds_
                ],
                "constraints": getattr(self, "constraints_", "demographic_parity"),
                "tie_seed": self.tie_seed_,
                "privacy_spent": None if spent is None else spent.to_dict(),
                "certified": getattr(self, "certified_", None),
                "certificates": [
                    c.to_dict() for c in (getattr(self, "certificates_", None) or ())
                ],
            }
        return {
            "format": "dpfair.fairclass.released_model/1",
            "estimator": type(self).__name__,
            "params": {k: v for k, v in self.get_params().items() if k != "random_state"},
            "feature_bounds": np.column_stack((self.feature_lows_, self.feature_highs_)).tolist(),
            "bandwidth": self.bandwidth_,
            "grid_axes": [a.tolist() for a in self.grid_.axes],
            "folds": [
                {"eta": f.eta.tolist(), "pi": f.pi.tolist(), "tau": f.tau, **_positive_field(f)}
                for f in self.folds_
            ],
            "constraints": getattr(self, "constraints_", "demographic_parity"),
            "tie_seed": self.tie_seed_,
            "privacy_spent": None if spent is None else spent.to_dict(),
            "certified": getattr(self, "certified_", None),
            "certificates": [c.to_dict() for c in (getattr(self, "certificates_", None) or ())],
        }


_COMMON_PARAMS_DOC = """
    feature_bounds : sequence of (lo, hi), one per feature
        *Public* box of the features (never computed from the data: min/max scaling leaks).
        Features are mapped to [0, 1] with it.
    bandwidth : float or None, default=None
        Kernel bandwidth h in units of the unit box (a fraction of each feature's public
        range). ``None``: the public rule :func:`dpfair.fairclass.bandwidth_rule`, which
        depends only on public quantities and spends no privacy.
    cross_fit : bool, default=True
        Fit twice with the halves swapped and average the two classifiers (paper §5.1.1).
    random_state : None, int, SeedSequence or Generator, default=None
        Seed of the split and of all noise. ``None`` uses fresh OS entropy (use that, or a
        generator seeded from :mod:`secrets`, in deployments).
    clip : bool, default=False
        Clip features into ``feature_bounds`` instead of raising on values outside.
    grid_resolution : float, default=4
        Grid nodes per bandwidth: the public grid has spacing ≤ h / grid_resolution.
    max_grid_nodes : int, default=2**18
        Cap on the number of grid nodes (the grid gets coarser beyond it).
"""

_COMMON_ATTRS_DOC = """
    bandwidth_ : float
        Bandwidth used (unit-box units).
    grid_ : KroneckerGaussianGrid
        The public grid carrying the released functions.
    folds_ : tuple of ReleasedFold
        One released model per fit (η̃ on the grid, π̃, τ).
    tau_ : ndarray of shape (n_fits,)
        Fairness threshold of each fit (0 for the unconstrained classifiers).
    pi_ : ndarray of shape (n_fits, 2)
        (π̃_0, π̃_1) of each fit.
    classes_ : ndarray [0, 1]
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X had string column names.
"""


class CDPFairClassifier(_PlugInBase):
    __doc__ = (
        """Differentially private classifier with a demographic-disparity cap (CDP-Fair).

    The single-server algorithm of Xue & Yu (paper 003, Algorithm 5): private group-wise
    kernel plug-in estimates (S1) and a private fairness threshold (S2) so that
    |P(Ŷ=1 | A=1) − P(Ŷ=1 | A=0)| ≤ α up to estimation error.

    Parameters
    ----------
    epsilon : float, default=1.0
        Total ε > 0 of the fit (replace-one neighbours).
    delta : float, default=1e-5
        Total δ ∈ (0, 1); the paper uses δ = (N/2)^-2.
    alpha : float, default=0.1
        Disparity tolerance α ∈ (0, 1).
    threshold_rule : {"certified", "target"}, default="certified"
        ``"certified"``: P(|DD| > α in the population and ``certified_`` is True) ≤
        ``fail_prob`` (a joint bound: among certified fits the share above α is at most
        ``fail_prob`` / P(certified), not ``fail_prob`` on every population). The threshold
        aims below α by a public margin (calibration sampling error, the noise of the
        released denominators and of a private check), then a private check of DD̂ at τ̂
        (Laplace, a share ``check_share`` of S2's ε) decides the certificate. If it fails,
        ``fit`` warns (:class:`dpfair.UncertifiedFairnessWarning`) and ``certified_`` is
        False. ``"target"``: the previous behaviour — the threshold aims at |DD̂| = α −
        ``alpha_margin`` on the calibration half (about half of the fits exceed α in the
        population); no certificate.
    fail_prob : float, default=0.05
        β of the certified rule (public): P(|DD| > α and certified) ≤ β. Plan it before
        fitting: :func:`dpfair.fairclass.plan_certification` predicts the margin and the
        smallest α that certifies, from public numbers only.
    constraints : {"demographic_parity", "equal_opportunity"}, default="demographic_parity"
        What α caps (Fairlearn's keywords): the demographic disparity DD, or the
        true-positive-rate difference P(Ŷ=1 | A=1, Y=1) − P(Ŷ=1 | A=0, Y=1). Equal
        opportunity uses a private TPR-difference curve on the calibration half (two
        private positive-label counts, same budget; ``docs/proofs/equal_opportunity.md``);
        in memory and out of core (``fit_cdp_fair_from_file``, a Session, Dask).
    on_uncertified : {"warn", "raise"}, default="warn"
        A failed certificate: ``"warn"`` returns the model (``certified_`` False) with
        :class:`dpfair.UncertifiedFairnessWarning`; ``"raise"`` returns nothing and raises
        :class:`~dpfair.fairclass.UncertifiedFairnessError` — the budget is spent all the
        same (the error carries the ledger).
    calibration_share : float in [0.1, 0.9], default=0.5
        Public share of the rows in the calibration half (S2 and the certificate), the rest
        training S1; without cross-fitting only. In memory the permutation split puts
        exactly ⌈share·n⌉ rows in it; out of core (and with ``split="position"``) each
        row's position hash does so with probability share. A larger share shrinks the
        certificate's margin (its sampling term ∝ (share·n)^-1/2) and the noise of S2, so a
        smaller α certifies, at the price of a score trained on fewer rows.
        :func:`~dpfair.fairclass.plan_certification` (``calibration_share=``) predicts the
        certification probability; ``docs/fairclass_certified.md`` measures both effects.
        Privacy unchanged (the split is data-independent and its sizes are public).
"""
        + _COMMON_PARAMS_DOC.replace(
            "    cross_fit : bool, default=True\n"
            "        Fit twice with the halves swapped and average the two classifiers "
            "(paper §5.1.1).",
            "    cross_fit : bool or None, default=None\n"
            "        Fit twice with the halves swapped and average the two classifiers "
            "(paper §5.1.1).\n"
            "        None: False for ``threshold_rule='certified'`` (S2 then gets the full ε on "
            "its own\n        half, and β is not split between two folds), True for "
            "``'target'``.",
        )
        + """    alpha_margin : float, default=0.0
        ``"target"``: aim at |DD| ≤ alpha − alpha_margin on the calibration half (paper §4.2
        suggests a margin of order N^-1/2 + (Nε)^-1). ``"certified"``: lowers the threshold's
        aim further below the certified margin (more fits certified, higher error).
    cross_fit_budget : {"split", "compose"}, default="split"
        With cross-fitting every row feeds one S1 and one S2 release. ``"split"`` divides
        (ε, δ) between them so the total is (ε, δ); ``"compose"`` gives each fit the full
        budget and reports the composed total (2ε, δ) in ``privacy_spent_``.
    s1_share : float, default=0.75
        Fraction of ε for S1 when cross-fitting splits the budget.
    count_share : float, default=0.05
        Share of S1's Gaussian budget (in μ²) for the group count behind π̃.
    threshold_count_share : float, default=0.25
        Fraction of S2's ε for the calibration group count (the rest drives τ̂).
    check_share : float, default=0.35
        Fraction of S2's ε for the certificate's check (``"certified"`` only).
    estimator : {"auto", "kernel", "linear"}, default="auto"
        The private group score of S1. ``"kernel"``: the paper's Gaussian-kernel estimate on
        a public grid (m^d nodes: d ≤ 3). ``"linear"``: logistic regression with the group
        as a feature, released by objective perturbation ((ε₁, δ)-DP, see
        ``fairclass/_linear.py``); scales to many features and one-hot categorical columns.
        ``"auto"``: kernel for ≤ 3 numeric features without categories, else linear.
    categories : mapping or None, default=None
        ``{column: [public categories]}`` (column index or name) for categorical columns,
        one-hot encoded over the public list (linear estimator only); their entry in
        ``feature_bounds`` is None. An unknown category is an error.
    split : {None, "permutation", "position"}, default=None
        How rows are split into the training and calibration halves (data-independent
        either way; the half sizes are public). None: ``"permutation"`` in memory (exact
        halves ⌊n/2⌋, ⌈n/2⌉), ``"position"`` out of core. ``"position"``: a seeded hash of
        the row position (``fairclass/_split.py``), so the same seed and the same rows in
        the same order give the same release in memory, from a file
        (:func:`~dpfair.fairclass.fit_cdp_fair_from_file`) and from a Dask DataFrame.
        ``"permutation"`` cannot be used out of core.
    radius : float or {"auto", "box"}, default="auto"
        Linear estimator only: the L2 radius r to which each centred row is clipped before
        the objective perturbation, whose noise is calibrated to it. Rows are centred at
        the public box midpoint (each numeric column mapped to [−1, 1], one-hot entries 0/1)
        and rows longer than r are shrunk onto radius r — clipping is part of the
        algorithm (a fixed map of one record). ``"auto"``: r is an ε-DP estimate of the
        median row norm on a public ladder (exact exponential mechanism, 4% of S1's ε,
        charged in the ledger as ``row radius``); ``"box"``: the public worst case
        sqrt(k + c) (k numeric, c categorical columns; nothing is clipped, nothing spent);
        a number: a public radius from outside knowledge (nothing spent).

    Attributes
    ----------
    certified_ : bool or None
        True if every fold is certified (|DD| ≤ α in the population with probability
        ≥ 1 − β), False if not (``fit`` warned), None for ``threshold_rule="target"``.
    certificates_ : tuple of FairnessCertificate or None
        Per fold: the released check D̃, the public margin t, β of the fold, the verdict.
    privacy_spent_ : Budget
        The guarantee of the whole fit, (ε, δ)-DP (never more than requested unless
        ``cross_fit_budget="compose"``).
    privacy_ledger_ : PrivacyLedger
        Every release with its rows, guarantee and noise; per-partition totals.
    path_privacy_spent_ : Budget
        What publishing *every* model of the same :func:`~dpfair.fairclass.fit_alpha_path`
        call costs together: the S1 release is shared (paid once), each α's S2 release is
        paid again, so for K values of α it is (max(ε₁, K·ε₂), δ) without cross-fitting
        and (ε₁ + K·ε₂, δ) with it. Equals ``privacy_spent_`` after ``fit`` (K = 1).
    path_privacy_ledger_ : PrivacyLedger
        The releases behind ``path_privacy_spent_``.
    budget_plan_ : BudgetPlan
        The derived noise scales (σ_c, σ_f, ε_c, ε_e).
"""
        + _COMMON_ATTRS_DOC
        + """
    Notes
    -----
    Privacy (details in ``docs/proofs/fairclass_cdp_fair.md``). Replace-one neighbours; n
    and the half sizes are public; the split is independent of the data.

    * S1 (training half): π̃ from the group-1 count + N(0, σ_c²) (sensitivity 1) and the
      four (group, label) kernel sums on the public grid + σ_f·GP(0, k_h) (joint RKHS
      sensitivity √2: each record adds one kernel bump of RKHS norm ≤ 1, linear binning
      included). Together one Gaussian mechanism with μ₁² = 1/σ_c² + 2/σ_f², calibrated
      exactly (analytic Gaussian) to (ε₁, δ); the count gets ``count_share`` of μ₁².
    * S2 (calibration half): the calibration group count + Laplace(1/ε_c) gives public
      denominators; τ̂ is drawn by the exponential mechanism on the exact DD̂ step function
      (sensitivity 1/m̃_1 + 1/m̃_0), ε_e-DP. The paper's Gaussian vertical shift returns a
      calibration record's own score and is not DP; see
      :func:`dpfair.fairclass.private_fair_threshold`.
    * Certificate (``threshold_rule="certified"``): D̃ = DD̂(τ̂) + Laplace(Δ/ε_k), ε_k-DP;
      certified iff −(α − t₋) ≤ D̃ ≤ α − t₊ with public margins t± (the side τ̂ points to
      gets the smaller one, its share 1 − κ of β; ``fairclass/_certify.py``).
    * Composition: one fit — halves are disjoint, so (ε, δ) with ε₁ = ε_c + ε_e + ε_k = ε;
      cross-fit — ε₁ + ε_c + ε_e + ε_k = ε per row (``cross_fit_budget="split"``).

    Prediction is post-processing of the released (η̃ grid, π̃, τ̂): it never reads the
    training data and never draws noise.

    References
    ----------
    G. Xue and Y. Yu, *Federated fairness-aware classification under differential privacy*
    (paper 003), Algorithm 5 and §5.1.1. R. Hall, A. Rinaldo and L. Wasserman (2013),
    *Differential privacy for functions and functional data*, JMLR 14.

    Examples
    --------
    >>> from dpfair.fairclass import CDPFairClassifier
    >>> from dpfair.fairclass.datasets import simulate
    >>> data = simulate(4000, rng=0)
    >>> clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1,
    ...                         feature_bounds=data.feature_bounds, random_state=0)
    >>> clf = clf.fit(data.X, data.y, sensitive_features=data.A)
    >>> clf.privacy_spent_.epsilon <= 1.0
    True
    """
    )

    _private = True
    _fair = True

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        alpha: float = 0.1,
        threshold_rule: str = "certified",
        fail_prob: float = 0.05,
        feature_bounds: Any = None,
        bandwidth: float | None = None,
        cross_fit: bool | None = None,
        random_state: Any = None,
        clip: bool = False,
        alpha_margin: float = 0.0,
        cross_fit_budget: str = "split",
        s1_share: float = 0.75,
        count_share: float = 0.05,
        threshold_count_share: float = 0.25,
        check_share: float = 0.35,
        grid_resolution: float = 4.0,
        max_grid_nodes: int = 2**18,
        estimator: str = "auto",
        categories: Any = None,
        split: str | None = None,
        radius: float | str = "auto",
        constraints: str = "demographic_parity",
        on_uncertified: str = "warn",
        calibration_share: float = 0.5,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.threshold_rule = threshold_rule
        self.fail_prob = fail_prob
        self.feature_bounds = feature_bounds
        self.bandwidth = bandwidth
        self.cross_fit = cross_fit
        self.random_state = random_state
        self.clip = clip
        self.alpha_margin = alpha_margin
        self.cross_fit_budget = cross_fit_budget
        self.s1_share = s1_share
        self.count_share = count_share
        self.threshold_count_share = threshold_count_share
        self.check_share = check_share
        self.grid_resolution = grid_resolution
        self.max_grid_nodes = max_grid_nodes
        self.estimator = estimator
        self.categories = categories
        self.split = split
        self.radius = radius
        self.constraints = constraints
        self.on_uncertified = on_uncertified
        self.calibration_share = calibration_share

    def _rule(self) -> str:
        rule = self.threshold_rule
        if rule not in THRESHOLD_RULES:
            raise InvalidParameterError(
                f"threshold_rule={rule!r}: expected 'certified' (P(|DD| > alpha and "
                "certified_) <= fail_prob) or 'target' (aim at alpha on the "
                "calibration half, no certificate)."
            )
        return str(rule)

    def _split_kind(self) -> str | None:
        kind = self.split
        if kind is not None and kind not in SPLITS:
            raise InvalidParameterError(
                f"split={kind!r}: expected None (in memory: 'permutation'; out of core: "
                "'position'), 'permutation' (exact halves) or 'position' (a seeded hash of the "
                "row position: the same release as the out-of-core fits of the same rows in "
                "the same order)."
            )
        return kind

    def _cross_fit_flag(self) -> bool:
        if self.cross_fit is None:
            return self._rule() == "target"
        return _check_bool("cross_fit", self.cross_fit)

    def _certify_fail_prob(self) -> float | None:
        if self._rule() != "certified":
            return None
        beta = check_positive("fail_prob", self.fail_prob)
        if not beta < 0.5:
            raise InvalidParameterError(
                f"fail_prob={self.fail_prob!r}: must lie in (0, 0.5) (e.g. 0.05: P(|DD| > "
                "alpha and certified_) <= 0.05)."
            )
        return beta

    def _privacy_params(self) -> tuple[float, float]:
        return check_budget(self.epsilon, self.delta)

    def _alpha_params(self) -> tuple[float, float]:
        return check_alpha(self.alpha, self.alpha_margin)

    def _plan(self, eps: float, delta: float) -> BudgetPlan:
        certified = self._certify_fail_prob() is not None
        return plan_budget(
            eps,
            delta,
            cross_fit=self._cross_fit_flag(),
            has_s2=True,
            cross_fit_budget=self.cross_fit_budget,  # type: ignore[arg-type]
            s1_share=self.s1_share,
            count_share=self.count_share,
            threshold_count_share=self.threshold_count_share,
            check_share=self.check_share if certified else 0.0,
            constraints=self._constraints(),
        )


class PrivatePlugInClassifier(_PlugInBase):
    __doc__ = (
        """Privacy-only baseline: CDP-Fair with the fairness step S2 removed (τ = 0).

    The group-wise plug-in classifier 1{η̃_a(x) ≥ 1/2} from the private S1 release, trained
    on half of the rows (as in paper §5.2, to mirror CDP-Fair's use of the data).

    Parameters
    ----------
    epsilon : float, default=1.0
    delta : float, default=1e-5
"""
        + _COMMON_PARAMS_DOC
        + """    count_share : float, default=0.05
        Share of the Gaussian budget (in μ²) for the group count behind π̃.

    Attributes
    ----------
    privacy_spent_ : Budget
    privacy_ledger_ : PrivacyLedger
    path_privacy_spent_, path_privacy_ledger_
        As in :class:`CDPFairClassifier` (equal to ``privacy_spent_``: no α path here).
    budget_plan_ : BudgetPlan
"""
        + _COMMON_ATTRS_DOC
        + """
    Notes
    -----
    Privacy: S1 as in :class:`CDPFairClassifier` with the full (ε, δ); with cross-fitting the
    two S1 releases use disjoint halves (parallel composition), so the total stays (ε, δ).
    """
    )

    _private = True
    _fair = False

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        feature_bounds: Any = None,
        bandwidth: float | None = None,
        cross_fit: bool = True,
        random_state: Any = None,
        clip: bool = False,
        count_share: float = 0.05,
        grid_resolution: float = 4.0,
        max_grid_nodes: int = 2**18,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.feature_bounds = feature_bounds
        self.bandwidth = bandwidth
        self.cross_fit = cross_fit
        self.random_state = random_state
        self.clip = clip
        self.count_share = count_share
        self.grid_resolution = grid_resolution
        self.max_grid_nodes = max_grid_nodes

    def _privacy_params(self) -> tuple[float, float]:
        return check_budget(self.epsilon, self.delta)

    def _plan(self, eps: float, delta: float) -> BudgetPlan:
        return plan_budget(
            eps, delta, cross_fit=bool(self.cross_fit), has_s2=False, count_share=self.count_share
        )


class FairPlugInClassifier(_PlugInBase):
    __doc__ = (
        """Fairness-only baseline: non-private plug-in with the exact fair threshold.

    The post-processing method of Zeng, Cheng & Dobriban (2024) with kernel estimates: η̂_a
    on the training half, τ̂ = argmin{|τ| : |DD̂(τ)| ≤ α} solved exactly on the calibration
    half's step function. **Not private.**

    Parameters
    ----------
    alpha : float, default=0.1
"""
        + _COMMON_PARAMS_DOC
        + """    alpha_margin : float, default=0.0
        Target |DD| ≤ alpha − alpha_margin on the calibration half.
    constraints : {"demographic_parity", "equal_opportunity"}, default="demographic_parity"
        What α caps (as in :class:`CDPFairClassifier`).

    Attributes
    ----------
    privacy_spent_ : None
        Not private.
"""
        + _COMMON_ATTRS_DOC
    )

    _private = False
    _fair = True

    def __init__(
        self,
        *,
        alpha: float = 0.1,
        feature_bounds: Any = None,
        bandwidth: float | None = None,
        cross_fit: bool = True,
        random_state: Any = None,
        clip: bool = False,
        alpha_margin: float = 0.0,
        grid_resolution: float = 4.0,
        max_grid_nodes: int = 2**18,
        constraints: str = "demographic_parity",
    ) -> None:
        self.alpha = alpha
        self.feature_bounds = feature_bounds
        self.bandwidth = bandwidth
        self.cross_fit = cross_fit
        self.random_state = random_state
        self.clip = clip
        self.alpha_margin = alpha_margin
        self.grid_resolution = grid_resolution
        self.max_grid_nodes = max_grid_nodes
        self.constraints = constraints

    def _alpha_params(self) -> tuple[float, float]:
        return check_alpha(self.alpha, self.alpha_margin)


class PlugInClassifier(_PlugInBase):
    __doc__ = (
        """Unconstrained baseline: the non-private group-wise plug-in 1{η̂_a(x) ≥ 1/2}.

    Trained on half of the rows (paper §5.2). **Not private, not fair.**

    Parameters
    ----------
"""
        + _COMMON_PARAMS_DOC
        + """
    Attributes
    ----------
    privacy_spent_ : None
        Not private.
"""
        + _COMMON_ATTRS_DOC
    )

    _private = False
    _fair = False

    def __init__(
        self,
        *,
        feature_bounds: Any = None,
        bandwidth: float | None = None,
        cross_fit: bool = True,
        random_state: Any = None,
        clip: bool = False,
        grid_resolution: float = 4.0,
        max_grid_nodes: int = 2**18,
    ) -> None:
        self.feature_bounds = feature_bounds
        self.bandwidth = bandwidth
        self.cross_fit = cross_fit
        self.random_state = random_state
        self.clip = clip
        self.grid_resolution = grid_resolution
        self.max_grid_nodes = max_grid_nodes


def prepare_out_of_core(
    clf: CDPFairClassifier, d: int
) -> tuple[FitSettings, NDArray[np.float64], NDArray[np.float64], bool]:
    """Validate ``clf`` (a configured :class:`CDPFairClassifier`) for a fit from aggregates
    of ``d`` numeric features, before any data is read: (settings, lows, highs, clip).

    An out-of-core source reads the rows only through kernel-grid aggregates, so the group
    score is the kernel one; its split is the position hash unless ``split`` says otherwise
    (``"permutation"`` is refused: it needs every position in memory).
    """
    if not isinstance(clf, CDPFairClassifier):
        raise InvalidParameterError(
            f"estimator={clf!r}: expected a CDPFairClassifier (configured, not fitted)."
        )
    if clf.estimator == "linear" or getattr(clf, "categories", None):
        raise InvalidParameterError(
            "estimator='linear' / categories: an out-of-core fit reads the rows only through "
            "kernel-grid aggregates; use estimator='kernel' (or 'auto') with numeric features."
        )
    clf._resolve_estimator(np.zeros((0, d)))  # validates the estimator name
    clf._alpha_params()
    if clf._split_kind() == "permutation":
        raise InvalidParameterError(
            "split='permutation': an out-of-core fit cannot permute the rows; use None or "
            "'position' (a seeded hash of the row position)."
        )
    settings, _fmap, lows, highs, clip = clf._public_request("kernel", d)
    assert lows is not None and highs is not None
    return settings, lows, highs, clip


def fit_from_source(
    clf: CDPFairClassifier, settings: FitSettings, source: Source
) -> CDPFairClassifier:
    """Fit ``clf`` from an aggregate ``source`` (a file by DuckDB, a Dask DataFrame) with
    the ``settings`` of :func:`prepare_out_of_core`; returns ``clf``.

    The same pipeline as :meth:`CDPFairClassifier.fit`; the estimator adopts the fitted
    state (plus the source's ``fitted_extras``, e.g. ``outofcore_``) and warns if the fit
    is not certified.
    """
    alpha = clf._alpha_params()
    rng = as_generator(clf.random_state, name="random_state")
    on_uncertified = clf._on_uncertified()
    result = run_pipeline(settings, source, [alpha], rng)
    refuse_uncertified(result.states[0], on_uncertified,
                       lambda: _uncertified_text(clf, result.states[0]))
    clf._adopt({**result.states[0], "n_features_in_": settings.d,
                **source.fitted_extras(result.n, result.half_sizes)})
    _warn_if_uncertified(clf)
    return clf

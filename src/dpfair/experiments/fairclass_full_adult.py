"""The registered study ``fairclass-full-adult`` (issue 12): many features on the full Adult.

Run it with ``dpfair reproduce fairclass-full-adult``. One repetition is one random 70/30
split of the bundled full Adult data (:func:`dpfair.fairclass.adult_full.load_full_adult`:
48,842 rows, 13 features, A = sex; public bounds and categories documented there). Cells
(method, ε):

``linear_all``
    ``CDPFairClassifier(estimator="linear")`` on all 13 attributes (public bounds and
    categories), certified default threshold rule; (ε, δ)-DP.
``kernel_3``
    Today's 3-feature CDP-Fair (kernel group scores) on the same rows' age, workclass code
    and education-num (:func:`three_features`, box ``ADULT_BOUNDS``), certified default
    rule; (ε, δ)-DP.
``nonprivate_lr``
    Logistic regression (scikit-learn, C = 1) on all attributes (:func:`public_design`:
    numeric columns scaled by their public bounds, one-hot categories) and the
    exact fair threshold argmin{|τ| : |DD̂(τ)| ≤ α} on the training split
    (:func:`nonprivate_lr_predict`). Not private: ``epsilon = inf``.

δ = (n_train/2)^-2, as in the other real-data studies. One fit per α (S1 shared across α by
:func:`dpfair.fairclass.fit_alpha_path`; each model is on its own the (ε, δ)-DP release of
``fit`` at that α). Outputs per α (column suffix as
:func:`dpfair.experiments.fairclass.alpha_column`): ``error`` and ``abs_dd`` (expected test
error and |DD| on the test split, from ``predict_proba``), ``above`` (1.0 if |DD| > α on the
test split) and ``certified`` (1.0/0.0; NaN for the non-private method); plus ``fit_seconds``
(wall time of the whole α path), ``epsilon_spent``/``delta_spent`` (one model's
``privacy_spent_``; NaN if not private), ``delta``, ``train_rows`` and ``test_rows``.

The split (and the optional subsample of ``n_rows`` rows, 0 = all, for tests) come from
``data_seed(seed, 3)``: every method and ε sees the same rows in repetition ``rep``. The
estimators' noise comes from ``seed`` itself. ``fit_seconds`` is a wall time and is the only
output that depends on the machine.

:mod:`benchmarks/fairclass_full_adult.py <fairclass_full_adult>` imports
:func:`three_features`, :func:`public_design` and :func:`nonprivate_lr_predict` from here.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair import UncertifiedFairnessWarning
from dpfair._errors import InvalidParameterError
from dpfair.experiments._fairclass import (
    _REF,
    alpha_column,
    alphas_text,
    data_seed,
    parse_alphas,
)
from dpfair.experiments._registry import register_experiment
from dpfair.fairclass import (
    CDPFairClassifier,
    dd_steps,
    demographic_disparity,
    exact_fair_threshold,
    fit_alpha_path,
    misclassification_error,
)
from dpfair.fairclass.adult_full import MixedFairnessDataset, load_full_adult
from dpfair.fairclass.datasets import ADULT_BOUNDS

__all__ = [
    "FULL_ADULT_ALPHAS",
    "FULL_ADULT_EPSILONS",
    "FULL_ADULT_METHODS",
    "FULL_ADULT_PRIVATE_METHODS",
    "full_adult_grid",
    "full_adult_trial",
    "nonprivate_lr_predict",
    "public_design",
    "three_features",
]

#: Methods in display order; ``nonprivate_lr`` has ``epsilon = inf``.
FULL_ADULT_METHODS: tuple[str, ...] = ("linear_all", "kernel_3", "nonprivate_lr")
FULL_ADULT_EPSILONS: tuple[float, ...] = (1.0, 4.0)
FULL_ADULT_ALPHAS: tuple[float, ...] = (0.05, 0.1)
FULL_ADULT_PRIVATE_METHODS: frozenset[str] = frozenset({"linear_all", "kernel_3"})
_DATA_CODE = 3  # data stream of the full Adult (1, 2: the 3-feature Adult, Law School)

#: Workclass label codes 0–8 of the 3-feature Adult (alphabetical, "?" first).
_WORKCLASS_CODES: tuple[str, ...] = (
    "?", "Federal-gov", "Local-gov", "Never-worked", "Private", "Self-emp-inc",
    "Self-emp-not-inc", "State-gov", "Without-pay",
)


def _codes(column: NDArray[Any], categories: Sequence[str], name: str) -> NDArray[np.intp]:
    """Position of every value of ``column`` in the public list ``categories`` (vectorised)."""
    values, inverse = np.unique(np.asarray(column, dtype=str), return_inverse=True)
    lookup = {c: k for k, c in enumerate(categories)}
    unknown = [v for v in values.tolist() if v not in lookup]
    if unknown:
        raise InvalidParameterError(
            f"column {name!r}: category {unknown[0]!r} is not in its public list."
        )
    return np.array([lookup[v] for v in values.tolist()], dtype=np.intp)[inverse.ravel()]


def three_features(X: NDArray[Any]) -> NDArray[np.float64]:
    """The 3-feature design (age, workclass code, education-num) of full-Adult rows ``X``.

    The workclass code is the position in the alphabetical list ("?" first, 0–8), the
    coding of the bundled 3-feature Adult (box ``ADULT_BOUNDS``).
    """
    wc = _codes(X[:, 1], _WORKCLASS_CODES, "workclass").astype(np.float64)
    return np.column_stack([X[:, 0].astype(float), wc, X[:, 4].astype(float)])


def public_design(
    X: NDArray[Any],
    bounds: Sequence[tuple[float, float] | None],
    categories: dict[int, tuple[str, ...]],
) -> NDArray[np.float64]:
    """u(X) ∈ [0, 1]^p from the public description only: numeric columns scaled by their
    public bounds, categorical columns one-hot over their public lists."""
    blocks: list[NDArray[np.float64]] = []
    for j, b in enumerate(bounds):
        if b is not None:
            lo, hi = b
            blocks.append(np.clip((X[:, j].astype(float) - lo) / (hi - lo), 0.0, 1.0)[:, None])
        else:
            cats = categories[j]
            onehot = np.zeros((X.shape[0], len(cats)))
            onehot[np.arange(X.shape[0]), _codes(X[:, j], cats, str(j))] = 1.0
            blocks.append(onehot)
    return np.hstack(blocks)


def nonprivate_lr_predict(
    U_train: NDArray[np.float64],
    A_train: NDArray[Any],
    y_train: NDArray[Any],
    U_test: NDArray[np.float64],
    A_test: NDArray[Any],
    alphas: Sequence[float],
) -> list[NDArray[np.int8]]:
    """Non-private logistic regression + exact group thresholds; test predictions per α.

    Logistic regression (scikit-learn, L2 penalty with C = 1, intercept) of y on (a, u);
    group score s = 2(2a − 1)π_a(η − 1/2) with the training group shares π (the score
    CDP-Fair thresholds); for each α the exact fair threshold argmin{|τ| : |DD̂(τ)| ≤ α} on
    the training split (:func:`~dpfair.fairclass.exact_fair_threshold` on
    :func:`~dpfair.fairclass.dd_steps`); prediction 1{s ≥ τ} for a = 1 and 1{s ≤ τ} for
    a = 0. **Not private**: the coefficients and the thresholds read the raw training data.
    """
    from sklearn.linear_model import LogisticRegression

    a_tr = np.asarray(A_train, dtype=np.intp)
    a_te = np.asarray(A_test, dtype=np.intp)
    model = LogisticRegression(C=1.0, max_iter=1000)
    model.fit(np.column_stack([a_tr, U_train]), np.asarray(y_train, dtype=np.intp))
    pi1 = float(np.mean(a_tr))
    pi = np.array([1.0 - pi1, pi1])

    def score(U: NDArray[np.float64], a: NDArray[np.intp]) -> NDArray[np.float64]:
        eta = model.predict_proba(np.column_stack([a, U]))[:, 1]
        return np.asarray(2.0 * (2.0 * a - 1) * pi[a] * (eta - 0.5), dtype=np.float64)

    z, zt = score(U_train, a_tr), score(U_test, a_te)
    steps = dd_steps(z[a_tr == 1], z[a_tr == 0])
    out = []
    for alpha in alphas:
        tau = exact_fair_threshold(steps, float(alpha)).tau
        out.append(np.where(a_te == 1, zt >= tau, zt <= tau).astype(np.int8))
    return out


@functools.lru_cache(maxsize=1)
def _data() -> tuple[MixedFairnessDataset, NDArray[np.float64], NDArray[np.float64]]:
    d = load_full_adult()
    return d, public_design(d.X, d.bounds, d.categories), three_features(d.X)


def full_adult_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One repetition: a random split of the full Adult, one method and ε, every α.

    ``params``: ``method`` (:data:`FULL_ADULT_METHODS`), ``epsilon`` (``inf`` for
    ``nonprivate_lr``), ``alphas`` (:func:`~dpfair.experiments.fairclass.alphas_text`),
    ``test_fraction``, ``n_rows`` (0: all rows; else a random subsample of that size, drawn
    before the split). Outputs: see the module documentation.
    """
    method = str(params["method"])
    if method not in FULL_ADULT_METHODS:
        raise InvalidParameterError(
            f"method={method!r}: expected one of {', '.join(FULL_ADULT_METHODS)}."
        )
    eps = float(params["epsilon"])
    if method in FULL_ADULT_PRIVATE_METHODS and not (math.isfinite(eps) and eps > 0):
        raise InvalidParameterError(f"epsilon={eps!r}: {method} needs a finite ε > 0.")
    if method not in FULL_ADULT_PRIVATE_METHODS and eps != math.inf:
        raise InvalidParameterError(f"epsilon={eps!r}: {method} is not private; use inf.")
    alphas = parse_alphas(params["alphas"])
    d, U, X3 = _data()
    rng = np.random.default_rng(data_seed(seed, _DATA_CODE))
    rows = np.arange(d.n)
    n_rows = int(params["n_rows"])
    if 0 < n_rows < d.n:
        rows = np.sort(rng.choice(d.n, size=n_rows, replace=False))
    perm = rng.permutation(rows.size)
    n_test = round(rows.size * float(params["test_fraction"]))
    tr, te = rows[np.sort(perm[n_test:])], rows[np.sort(perm[:n_test])]
    delta = (tr.size / 2) ** -2.0
    yt, At = d.y[te], d.A[te]
    out: dict[str, Any] = {"train_rows": int(tr.size), "test_rows": int(te.size)}
    t0 = time.perf_counter()
    if method == "nonprivate_lr":
        probs: list[NDArray[Any]] = nonprivate_lr_predict(
            U[tr], d.A[tr], d.y[tr], U[te], At, alphas
        )
        fit_s = time.perf_counter() - t0
        certified = [math.nan] * len(alphas)
        spent = None
    else:
        X: NDArray[Any]
        kw: dict[str, Any]
        if method == "linear_all":
            X, kw = d.X, {"feature_bounds": d.bounds, "categories": d.categories,
                          "estimator": "linear"}
        else:
            X, kw = X3, {"feature_bounds": ADULT_BOUNDS}
        est = CDPFairClassifier(epsilon=eps, delta=delta, random_state=seed, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            models = fit_alpha_path(est, X[tr], d.y[tr], sensitive_features=d.A[tr],
                                    alphas=alphas)
        fit_s = time.perf_counter() - t0
        probs = [m.predict_proba(X[te], sensitive_features=At)[:, 1] for m in models]
        certified = [float(bool(m.certified_)) for m in models]
        spent = models[0].privacy_spent_
    for a, p, c in zip(alphas, probs, certified, strict=True):
        p = np.asarray(p, dtype=np.float64)
        add = abs(demographic_disparity(p, At))
        out[alpha_column("error", a)] = misclassification_error(yt, p)
        out[alpha_column("abs_dd", a)] = add
        out[alpha_column("above", a)] = float(add > a)
        out[alpha_column("certified", a)] = c
    out["fit_seconds"] = fit_s
    out["epsilon_spent"] = math.nan if spent is None else float(spent.epsilon)
    out["delta_spent"] = math.nan if spent is None else float(spent.delta)
    out["delta"] = delta if method in FULL_ADULT_PRIVATE_METHODS else math.nan
    return out


def full_adult_grid(
    methods: Sequence[str] = FULL_ADULT_METHODS,
    epsilons: Sequence[float] = FULL_ADULT_EPSILONS,
    alphas: Sequence[float] = FULL_ADULT_ALPHAS,
    test_fraction: float = 0.3,
    n_rows: int = 0,
) -> list[dict[str, Any]]:
    """Cells (method, ε) of ``fairclass-full-adult`` (``nonprivate_lr`` once, ε = ∞)."""
    return [
        {"method": m, "epsilon": float(e), "alphas": alphas_text(alphas),
         "test_fraction": float(test_fraction), "n_rows": int(n_rows)}
        for m in methods
        for e in (epsilons if m in FULL_ADULT_PRIVATE_METHODS else (math.inf,))
    ]


register_experiment(
    name="fairclass-full-adult",
    description=(
        "Issue 12: CDP-Fair with all 13 Adult attributes (estimator='linear') vs the "
        "3-feature kernel CDP-Fair (both certified rule) vs non-private LR + exact "
        "thresholds, on random 70/30 splits of the bundled full Adult (48,842 rows, "
        "A = sex); eps in {1, 4}, alpha in {0.05, 0.1}."
    ),
    grid=full_adult_grid(),
    reps=10,
    metrics=(*(alpha_column(k, a) for a in FULL_ADULT_ALPHAS
               for k in ("error", "abs_dd", "above", "certified")), "fit_seconds"),
    reference=f"{_REF}; issue 12 (many features), docs/fairclass_full_adult.md",
)(full_adult_trial)

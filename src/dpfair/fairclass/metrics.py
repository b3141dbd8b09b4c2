"""Error, demographic disparity and equal-opportunity difference of (possibly randomised)
classifiers.

For a classifier that outputs 1 with probability p(x, a), the expected misclassification
error is mean(p·(1 − y) + (1 − p)·y) and the demographic disparity is
DD = mean(p | A = 1) − mean(p | A = 0) (paper 003, Definition 4). Pass hard labels (0/1) for
a deterministic classifier, or ``predict_proba(...)[:, 1]`` for the expected values of the
cross-fitted randomised classifier (as in the paper's figures).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpfair._errors import InvalidDataError
from dpfair.fairclass._validation import check_binary, check_sensitive

__all__ = ["demographic_disparity", "equal_opportunity_difference", "misclassification_error"]


def _rates(p: ArrayLike, name: str = "y_pred") -> np.ndarray[Any, np.dtype[np.float64]]:
    arr = np.asarray(p, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise InvalidDataError(f"{name} is empty.")
    if not np.all(np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise InvalidDataError(f"{name}: values must be probabilities in [0, 1] (or 0/1 labels).")
    return arr


def misclassification_error(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Expected misclassification error of predictions (labels or P(Ŷ = 1)).

    Parameters
    ----------
    y_true : array-like of 0/1
    y_pred : array-like of labels 0/1 or probabilities of predicting 1
    """
    p = _rates(y_pred)
    y = check_binary("y_true", y_true, n_samples=p.size).astype(np.float64)
    return float(np.mean(p * (1.0 - y) + (1.0 - p) * y))


def demographic_disparity(y_pred: ArrayLike, sensitive_features: ArrayLike) -> float:
    """DD = P(Ŷ = 1 | A = 1) − P(Ŷ = 1 | A = 0) (signed; the paper reports |DD|).

    Parameters
    ----------
    y_pred : array-like of labels 0/1 or probabilities of predicting 1
    sensitive_features : array-like of 0/1
    """
    p = _rates(y_pred)
    a = check_sensitive(sensitive_features, p.size)
    if not (np.any(a == 1) and np.any(a == 0)):
        raise InvalidDataError("sensitive_features: both groups 0 and 1 must be present.")
    return float(p[a == 1].mean() - p[a == 0].mean())


def equal_opportunity_difference(
    y_true: ArrayLike, y_pred: ArrayLike, sensitive_features: ArrayLike
) -> float:
    """EOD = P(Ŷ = 1 | A = 1, Y = 1) − P(Ŷ = 1 | A = 0, Y = 1) (signed true-positive-rate
    difference; the cap of ``constraints="equal_opportunity"`` is |EOD| ≤ α).

    Fairlearn's ``equal_opportunity_difference`` is the unsigned max − min of the same two
    rates, i.e. |EOD| here.

    Parameters
    ----------
    y_true : array-like of 0/1
    y_pred : array-like of labels 0/1 or probabilities of predicting 1
    sensitive_features : array-like of 0/1
    """
    p = _rates(y_pred)
    y = check_binary("y_true", y_true, n_samples=p.size)
    a = check_sensitive(sensitive_features, p.size)
    pos1, pos0 = (a == 1) & (y == 1), (a == 0) & (y == 1)
    if not (np.any(pos1) and np.any(pos0)):
        raise InvalidDataError(
            "y_true, sensitive_features: both groups need a positive label (y = 1) for the "
            "true-positive rates."
        )
    return float(p[pos1].mean() - p[pos0].mean())

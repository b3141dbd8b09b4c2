"""Input checks for :mod:`dpfair.fairclass`: public feature boxes, binary labels and groups.

Messages read *argument = value: what is wrong. How to fix it.* Every check runs before any
private computation, so a refused call has released nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import (
    InsufficientDataError,
    InvalidDataError,
    InvalidParameterError,
    MissingPublicBoundError,
)
from dpfair._validation import check_alpha as check_alpha
from dpfair._validation import check_budget as check_budget

__all__ = [
    "AUTO_KERNEL_MAX_D",
    "MIN_GROUP_ROWS",
    "check_alpha",
    "check_binary",
    "check_bound_width",
    "check_budget",
    "check_feature_bounds",
    "check_group_sizes",
    "check_group_table",
    "check_sensitive",
    "scale_to_unit_box",
]

#: Fewest rows of each sensitive group (in the whole training set) that ``fit`` accepts.
MIN_GROUP_ROWS = 20
#: ``estimator="auto"`` keeps the kernel grid up to this many features (CDP-Fair and FDP).
#: Defined here, not in ``_estimators`` (scikit-learn), so that the FDP commands that read
#: it import no scikit-learn or pandas (issue 23, item 7).
AUTO_KERNEL_MAX_D = 3


def check_feature_bounds(
    feature_bounds: Any, n_features: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate the public feature box; returns (lows, highs) arrays of shape (d,)."""
    example = ", ".join(["(lo, hi)"] * min(n_features, 3)) + (", ..." if n_features > 3 else "")
    if feature_bounds is None:
        raise MissingPublicBoundError(
            f"feature_bounds=None: a public box is required, one (lo, hi) pair per feature, "
            f"e.g. feature_bounds=[{example}]. It cannot be taken from X, because the min/max "
            "of private data is itself a release (min-max scaling leaks)."
        )
    try:
        arr = np.array(feature_bounds, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameterError(
            f"feature_bounds={feature_bounds!r}: expected {n_features} (lo, hi) pairs of real "
            "numbers."
        ) from None
    if arr.ndim == 1 and arr.size == 2 and n_features == 1:
        arr = arr.reshape(1, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InvalidParameterError(
            f"feature_bounds: expected one (lo, hi) pair per feature, shape ({n_features}, 2); "
            f"got shape {arr.shape}."
        )
    if arr.shape[0] != n_features:
        raise InvalidParameterError(
            f"feature_bounds: {arr.shape[0]} pair(s) given but X has {n_features} feature(s); "
            "give one public (lo, hi) pair per column of X, in column order."
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError("feature_bounds: every bound must be finite.")
    bad = np.flatnonzero(arr[:, 0] >= arr[:, 1])
    if bad.size:
        j = int(bad[0])
        raise InvalidParameterError(
            f"feature_bounds[{j}]={tuple(arr[j])}: lo must be strictly smaller than hi; swap "
            "them or widen the range."
        )
    for j in range(arr.shape[0]):
        check_bound_width(j, float(arr[j, 0]), float(arr[j, 1]))
    return arr[:, 0].copy(), arr[:, 1].copy()


def check_bound_width(label: Any, lo: float, hi: float) -> None:
    """Refuse a public box side whose width ``hi − lo`` overflows binary64.

    Every map to the unit box divides by the width: with ``hi − lo = inf`` (e.g.
    (-1e308, 1e308)) a record at ``hi`` maps to inf/inf = NaN and every other one to 0, so
    the box must be refused before any data are read (the one check for the kernel grid's
    :func:`check_feature_bounds` and the linear/RFF :class:`FeatureMap`).
    """
    if not np.isfinite(hi - lo):
        raise InvalidParameterError(
            f"feature_bounds[{label!r}]=({lo!r}, {hi!r}): the width hi - lo overflows a "
            "float (inf), so the map to the unit box is undefined; give a narrower public "
            "range or rescale the column (e.g. other units)."
        )


def scale_to_unit_box(
    X: NDArray[np.float64],
    lows: NDArray[np.float64],
    highs: NDArray[np.float64],
    *,
    clip: bool,
    name: str = "X",
    feature_names: Sequence[str] | None = None,
) -> NDArray[np.float64]:
    """Map X to [0, 1]^d with the public box; outside values are an error unless ``clip``.

    Never modifies ``X`` in place.
    """
    U = (X - lows) / (highs - lows)
    if clip:
        return np.clip(U, 0.0, 1.0)
    outside = (U < 0.0) | (U > 1.0)
    if outside.any():
        rows, cols = np.nonzero(outside)
        j = int(cols[0])
        label = feature_names[j] if feature_names is not None else f"column {j}"
        count = int(outside[:, j].sum())
        raise InvalidDataError(
            f"{name}: {count} value(s) of {label} lie outside its public bounds "
            f"[{lows[j]:g}, {highs[j]:g}] (first at row {int(rows[0])}: "
            f"{X[rows[0], j]:g}). Widen feature_bounds to a range that is public knowledge, "
            "or pass clip=True to clip values into the box."
        )
    return U


def check_binary(name: str, values: Any, *, n_samples: int | None = None) -> NDArray[np.int8]:
    """Return a 1-D int8 array of 0/1 values, or raise with a message naming ``name``."""
    if values is None:
        raise InvalidDataError(
            f"{name}=None: required. Pass one 0/1 value per row of X"
            + (" (the sensitive group of each row)." if name == "sensitive_features" else ".")
        )
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):
        raise InvalidDataError(f"{name}: could not be read as an array.") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise InvalidDataError(
            f"{name}: expected a 1-D array (one 0/1 value per row), got shape {arr.shape}. "
            + (
                "Only one binary sensitive attribute is supported."
                if name == "sensitive_features"
                else ""
            )
        )
    if n_samples is not None and arr.shape[0] != n_samples:
        raise InvalidDataError(
            f"{name} has {arr.shape[0]} value(s) but X has {n_samples} row(s): they must match "
            "row for row."
        )
    if arr.dtype == bool:
        return arr.astype(np.int8)
    if arr.dtype.kind not in "iuf":
        uniq = np.unique(arr.astype(str))[:4]
        raise InvalidDataError(
            f"{name}: expected the values 0 and 1, got {arr.dtype} values such as "
            f"{', '.join(map(repr, uniq.tolist()))}. Encode the "
            + ("positive outcome as 1." if name == "y" else "two groups as 0 and 1.")
        )
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InvalidDataError(f"{name} contains NaN or infinite values: remove or impute them.")
    ok = (arr == 0) | (arr == 1)
    if not ok.all():
        bad = np.unique(arr[~ok])[:4]
        raise InvalidDataError(
            f"{name}: must be binary (0/1); found other value(s) "
            f"{', '.join(f'{v:g}' for v in bad.astype(float))}. "
            + (
                "Multi-class targets are not supported; encode the positive outcome as 1."
                if name == "y"
                else "Exactly two groups are supported; encode them as 0 and 1."
            )
        )
    return arr.astype(np.int8)


def check_sensitive(values: Any, n_samples: int) -> NDArray[np.int8]:
    """``sensitive_features``: one 0/1 group label per row."""
    return check_binary("sensitive_features", values, n_samples=n_samples)


def check_group_sizes(A: NDArray[np.int8], y: NDArray[np.int8] | None = None) -> None:
    """Refuse data with an empty or tiny group (or a single label).

    Notes
    -----
    This refusal is a data-dependent event outside the DP guarantee, like all input
    validation: an error reveals only that a group has fewer than :data:`MIN_GROUP_ROWS`
    rows (or that y is constant), and nothing is released.
    """
    labels = np.zeros(A.shape[0], dtype=np.intp) if y is None else y.astype(np.intp)
    table = np.zeros((2, 2), dtype=np.int64)
    np.add.at(table, (A.astype(np.intp), labels), 1)
    check_group_table(table, check_labels=y is not None)


def check_group_table(table: NDArray[np.int64], *, check_labels: bool = True) -> None:
    """:func:`check_group_sizes` from the (group, label) counts of all rows (how an
    out-of-core fit knows its data)."""
    for a in (0, 1):
        count = int(table[a].sum())
        if count == 0:
            raise InsufficientDataError(
                f"sensitive_features: group {a} is empty; both groups 0 and 1 must be present "
                "to estimate (and constrain) the demographic disparity."
            )
        if count < MIN_GROUP_ROWS:
            raise InsufficientDataError(
                f"sensitive_features: group {a} has only {count} row(s); at least "
                f"{MIN_GROUP_ROWS} are needed (half go to each of the two fitting stages). "
                "Collect more data for that group."
            )
    by_label = table.sum(axis=0)
    if check_labels and int(by_label.min()) == 0:
        only = int(np.argmax(by_label))
        raise InsufficientDataError(
            f"y: all values are {only}; both outcomes 0 and 1 must occur to fit a classifier."
        )

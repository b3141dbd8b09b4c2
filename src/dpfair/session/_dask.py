"""Sufficient statistics of a Dask DataFrame, computed on the cluster.

Every function here runs one task per partition on the workers and sums the per-partition
results in a tree on the cluster; only the final aggregate (a histogram of 2^D integers, a
few counts) comes back to the session. Nothing here is released: the aggregates are the
inputs of the mechanisms, exactly those the DuckDB path computes for a file.

The partition function is :func:`dpfair.mechanisms.leaf_counts` on the clipped column, so
the counts are *equal* (integers, not approximately) to :func:`dpfair.data.histogram_counts`
on a file with the same values, and a release with the same seed gives the same output.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError

__all__ = ["collect_column", "histogram_counts"]


def _check_numeric(frame: Any, column: Hashable) -> None:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    dtype = frame[column].dtype
    if not is_numeric_dtype(dtype) or is_bool_dtype(dtype):
        raise InvalidDataError(f"column={column!r}: has dtype {dtype}, expected a numeric column.")


def _partition_histogram(
    part: Any, lo: float, hi: float, depth: int
) -> tuple[NDArray[np.int64], int, int]:
    """(leaf counts of the clipped finite values, #missing, #NaN/inf) of one partition."""
    from dpfair.mechanisms import leaf_counts

    x = part.to_numpy(dtype=np.float64, na_value=np.nan)
    n_missing = int(part.isna().sum())
    finite = np.isfinite(x)
    n_bad = int(x.size - finite.sum()) - n_missing
    counts = leaf_counts(np.clip(x[finite], lo, hi), (lo, hi), depth)
    return counts, n_missing, n_bad


def _add(
    *parts: tuple[NDArray[np.int64], int, int],
) -> tuple[NDArray[np.int64], int, int]:
    counts = parts[0][0].copy()
    missing, bad = parts[0][1], parts[0][2]
    for c, m, b in parts[1:]:
        counts += c
        missing += m
        bad += b
    return counts, missing, bad


def _tree_sum(items: list[Any], add: Any = _add, fan_in: int = 8) -> Any:
    """Combine delayed partials with ``add`` in a tree on the cluster (one delayed result)."""
    import dask

    while len(items) > 1:
        items = [dask.delayed(add, pure=True)(*items[i : i + fan_in])
                 for i in range(0, len(items), fan_in)]
    return items[0]


def histogram_counts(
    frame: Any, column: Hashable, bounds: tuple[float, float], depth: int
) -> NDArray[np.int64]:
    """Counts of ``column`` (clipped into ``bounds``) in 2^depth equal bins, on the cluster.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        The data, partitioned anywhere the active Dask scheduler can reach.
    column : hashable
        A numeric column.
    bounds : (float, float)
        Public range; values outside are clipped into it.
    depth : int
        1 ≤ depth ≤ 24.

    Returns
    -------
    ndarray of shape (2^depth,), int64
        Exactly ``dpfair.mechanisms.leaf_counts(np.clip(x, lo, hi), bounds, depth)`` and
        :func:`dpfair.data.histogram_counts` on a file with the same values.

    Raises
    ------
    InvalidDataError
        Missing, NaN or infinite values (counted, never dropped), no rows, a non-numeric
        column.
    """
    import dask

    from dpfair._validation import check_interval_bounds

    lo, hi = check_interval_bounds("bounds", bounds)
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not (
        1 <= depth <= 24
    ):
        raise InvalidParameterError(f"depth={depth!r}: expected an integer in 1..24.")
    _check_numeric(frame, column)
    partials = [
        dask.delayed(_partition_histogram, pure=True)(part, lo, hi, int(depth))
        for part in frame[column].to_delayed()
    ]
    (counts, n_missing, n_bad), = dask.compute(_tree_sum(partials))
    total = int(counts.sum()) + n_missing + n_bad
    if total == 0:
        raise InvalidDataError(f"column={column!r}: the Dask DataFrame has no rows.")
    if n_missing or n_bad:
        raise InvalidDataError(
            f"column={column!r}: {n_missing} missing and {n_bad} NaN/infinite value(s) among "
            f"{total} rows. dpfair never drops rows silently: remove or impute them first."
        )
    return np.asarray(counts, dtype=np.int64)


def collect_column(frame: Any, column: Hashable) -> NDArray[np.float64]:
    """The whole column as float64 in this process (for releases that need every record)."""
    _check_numeric(frame, column)
    series = frame[column].compute()
    return np.array(series.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)

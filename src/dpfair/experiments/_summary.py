"""Per-cell summaries of a result table: means with 95% intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import stats

from dpfair.experiments._registry import Experiment

__all__ = ["LEVEL", "metric_columns", "summarize"]

#: Confidence level of the intervals in the summary.
LEVEL = 0.95


def metric_columns(table: pa.Table, experiment: Experiment) -> list[str]:
    """The outputs to summarise: ``experiment.metrics`` or every numeric/boolean output."""
    skip = {"cell", "rep", *experiment.parameters}
    available = [c for c in table.column_names if c not in skip]
    if experiment.metrics:
        return [m for m in experiment.metrics if m in available]
    out = []
    for name in available:
        t = table.schema.field(name).type
        if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
            out.append(name)
    return out


def _proportion(k: int, n: int) -> tuple[float, float]:
    """Exact two-sided Clopper–Pearson interval at level :data:`LEVEL`."""
    a = (1.0 - LEVEL) / 2.0
    low = float(stats.beta.ppf(a, k, n - k + 1)) if k > 0 else 0.0
    high = float(stats.beta.ppf(1.0 - a, k + 1, n - k)) if k < n else 1.0
    return low, high


def _mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and Student-t interval at level :data:`LEVEL` (NaN bounds for < 2 values)."""
    n = values.size
    mean = float(np.mean(values)) if n else math.nan
    if n < 2 or not np.all(np.isfinite(values)):
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + LEVEL / 2.0, n - 1) * np.std(values, ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half


def summarize(
    table: pa.Table, experiment: Experiment, metrics: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One record per grid cell: its parameters and, per metric, mean and 95% interval.

    Parameters
    ----------
    table : pyarrow.Table
        A result table with ``cell`` and ``rep`` columns (as returned by the runner).
    experiment : Experiment
        Provides the grid (parameters of each cell) and the default metrics.
    metrics : sequence of str, optional
        Outputs to summarise; default :func:`metric_columns`.

    Returns
    -------
    list of dict
        ``{"cell", "reps", **params, metric: {"kind", "n", "mean", "low", "high",
        "median"}}`` for every cell with at least one stored repetition, in cell order.
        Boolean outputs are proportions with the exact Clopper–Pearson interval; numeric
        outputs get the Student-t interval of the mean (NaN values are dropped and counted
        in ``n_nan``; an infinite value makes the interval undefined).
    """
    names = list(metrics) if metrics is not None else metric_columns(table, experiment)
    if table.num_rows == 0:
        return []
    cells = table.column("cell").to_numpy()
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
    stops = np.r_[starts[1:], cells.size]
    columns = {m: table.column(m) for m in names}
    out: list[dict[str, Any]] = []
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        cell = int(cells[start])
        record: dict[str, Any] = {"cell": cell, "reps": stop - start, **experiment.grid[cell]}
        for m, col in columns.items():
            part = col.slice(start, stop - start)
            if pa.types.is_boolean(part.type):
                flags = part.drop_null().to_numpy(zero_copy_only=False).astype(bool)
                k, n = int(flags.sum()), int(flags.size)
                low, high = _proportion(k, n) if n else (math.nan, math.nan)
                record[m] = {"kind": "proportion", "n": n, "count": k,
                             "mean": k / n if n else math.nan, "low": low, "high": high}
                continue
            values = part.drop_null().to_numpy(zero_copy_only=False).astype(float)
            nan = np.isnan(values)
            values = values[~nan]
            mean, low, high = _mean_interval(values)
            record[m] = {"kind": "mean", "n": int(values.size), "n_nan": int(nan.sum()),
                         "mean": mean, "low": low, "high": high,
                         "median": float(np.median(values)) if values.size else math.nan}
        out.append(record)
    return out

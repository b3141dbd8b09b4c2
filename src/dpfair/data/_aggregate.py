"""Out-of-core aggregates computed by DuckDB: exact bin counts of one column.

The median's tree-based methods only read counts on a grid, and ExpMech can run on
bin-rounded records (see :func:`dpfair.median.confidence_interval_from_counts`), so a
file far larger than memory reduces to 2^D integers in one streaming SQL pass. The same
SELECT runs on any SQL engine with floor() and GROUP BY.

Exactness. The bins must be *exactly* those of :func:`dpfair.mechanisms.leaf_counts`
(bin j = (g_j, g_{j+1}], bin 0 also holding lo, g_j = ``numpy.linspace`` edges), because the
coverage argument reads "count ≤ g_j". DuckDB computes r = (x − lo)/step; a value whose r
is more than 1e-6 from an integer lies strictly inside bin floor(r) whatever the floating
rounding (the rounding error of r is < 1e-8 for up to 2^24 bins). Values within 1e-6 of an
edge — including atoms such as integer data on an integer grid — are returned grouped by
value and placed with ``numpy.searchsorted`` on the exact edges, in Python.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._validation import check_interval_bounds
from dpfair.data._io import FileFormat, _check_path, _checked_column, _resolve_format, _source

__all__ = ["histogram_counts"]

_EDGE_TOLERANCE = 1e-6  # in units of one bin
_MAX_DEPTH = 24


def histogram_counts(
    path: str | os.PathLike[str],
    column: str,
    bounds: Sequence[float],
    depth: int,
    *,
    format: FileFormat | None = None,
    memory_limit: str = "1GB",
    threads: int | None = None,
) -> NDArray[np.int64]:
    """Counts of ``column`` (clipped into ``bounds``) in 2^depth equal bins, out of core.

    Parameters
    ----------
    path : str or path-like
        CSV or Parquet file of any size (DuckDB streams it).
    column : str
        Numeric column.
    bounds : (float, float)
        Public range; values outside are clipped into it (the median's documented
        clipping: it keeps the rank of any median inside the range).
    depth : int
        1 ≤ depth ≤ 24; the result has 2^depth bins.
    format : {"csv", "parquet"} or None
        ``None`` detects Parquet by its magic bytes.
    memory_limit : str, default="1GB"
        DuckDB's memory cap for the query (it spills to disk beyond it).
    threads : int, optional
        DuckDB worker threads (default: DuckDB's own choice).

    Returns
    -------
    ndarray of shape (2^depth,), dtype int64
        Exactly ``dpfair.mechanisms.leaf_counts(np.clip(x, lo, hi), bounds, depth)``.

    Raises
    ------
    InvalidDataError
        NULL, NaN or infinite values (counted in the message; never dropped), no rows.
    InvalidParameterError
        Missing file or column, non-numeric column, bad bounds or depth.
    """
    from dpfair.mechanisms import leaf_edges

    lo, hi = check_interval_bounds("bounds", bounds)
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not (
        1 <= depth <= _MAX_DEPTH
    ):
        raise InvalidParameterError(f"depth={depth!r}: expected an integer in 1..{_MAX_DEPTH}.")
    p = _check_path(path)
    fmt = _resolve_format(p, format)
    n_bins = 2**int(depth)
    step = (hi - lo) / n_bins
    with duckdb.connect(":memory:") as con:
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute("SET enable_progress_bar = false")
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        q = _checked_column(con, p, fmt, column)
        sql = f"""
            WITH src AS (SELECT CAST({q} AS DOUBLE) AS v FROM {_source(fmt)}),
            tagged AS (
                SELECT CASE WHEN v IS NULL THEN 'null'
                            WHEN isnan(v) OR isinf(v) THEN 'nonfinite'
                            ELSE 'ok' END AS kind,
                       least(greatest(v, $lo), $hi) AS x
                FROM src),
            placed AS (
                SELECT kind, x, (x - $lo) / $step AS r FROM tagged)
            SELECT kind,
                   CASE WHEN kind = 'ok' AND abs(r - round(r)) > $tol
                        THEN CAST(floor(r) AS BIGINT) END AS bin,
                   CASE WHEN kind = 'ok' AND abs(r - round(r)) <= $tol THEN x END AS edge_value,
                   count(*) AS n
            FROM placed
            GROUP BY ALL
        """
        try:
            rows = con.execute(sql.replace("?", "$path"), {
                "path": str(p), "lo": lo, "hi": hi, "step": step, "tol": _EDGE_TOLERANCE,
            }).fetchall()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            raise InvalidDataError(
                f"column='{column}': could not be aggregated from '{p.name}' ({first})."
            ) from None
    counts = np.zeros(n_bins, dtype=np.int64)
    n_null = sum(int(r[3]) for r in rows if r[0] == "null")
    n_bad = sum(int(r[3]) for r in rows if r[0] == "nonfinite")
    total = sum(int(r[3]) for r in rows)
    if total == 0:
        raise InvalidDataError(f"column='{column}': '{p.name}' has no rows.")
    if n_null or n_bad:
        raise InvalidDataError(
            f"column='{column}': {n_null} missing (NULL) and {n_bad} NaN/infinite value(s) "
            f"among {total} rows. dpfair never drops rows silently: remove or impute them "
            "first."
        )
    inner = [(int(r[1]), int(r[3])) for r in rows if r[1] is not None]
    if inner:
        idx, cnt = np.array(inner, dtype=np.int64).T
        if idx.min() < 0 or idx.max() >= n_bins:  # cannot happen after clipping
            raise InvalidDataError("internal: a value fell outside the bins after clipping.")
        np.add.at(counts, idx, cnt)
    near = [(float(r[2]), int(r[3])) for r in rows if r[0] == "ok" and r[1] is None]
    if near:
        values, cnt = np.array(near, dtype=np.float64).T
        edges = leaf_edges((lo, hi), int(depth))
        idx = np.clip(np.searchsorted(edges, values, side="left") - 1, 0, n_bins - 1)
        np.add.at(counts, idx, cnt.astype(np.int64))
    return counts

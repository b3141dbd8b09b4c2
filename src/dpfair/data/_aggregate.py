"""Out-of-core aggregates computed by DuckDB: exact bin counts of one column.

The median's tree-based methods only read counts on a grid, and ExpMech can run on
bin-rounded records (see :func:`dpfair.median.confidence_interval_from_counts`), so a
file far larger than memory reduces to 2^D integers in one streaming SQL pass. The same
SELECT runs on any SQL engine with floor() and GROUP BY.

Exactness: one rule, shared with :func:`dpfair.mechanisms.leaf_counts`. The bins are
those of the public float grid g = :func:`dpfair.mechanisms.leaf_edges` (computed once):
bin j = (g_j, g_{j+1}], bin 0 also holding lo, decided by exact float comparisons of x with
g_j (the coverage argument reads "count ≤ g_j"). DuckDB computes r = (x − lo)/step with
step = W/2^D, W = fl(hi − lo). Each g_j = fl(lo + W·j/2^D) is within ½ulp(M) of its ideal
value (M = max(|lo|, |hi|)), fl(x − lo) within ½ulp(2M) of x − lo, and the division adds
a relative 2^-53, so r is within τ₀ = (ulp(M) + ulp(2M))·2^D/W + 2^D·2^-53 bin units of the
position of x relative to the float grid. A value with |r − round(r)| > τ = 1e-6 + 4τ₀
therefore lies strictly between the same two float edges as r does, and bin floor(r) *is*
the rule's answer. Values within τ of an edge — atoms on an integer grid, or every value
when ulp(lo) is not negligible against the bin width (bounds (1e6, 1e6 + 0.001) at depth 9
have τ ≈ 7.2e-4; a fixed 1e-6 misplaced values on its edges) — are returned grouped by
value and placed by the rule itself (``numpy.searchsorted`` on g), in Python. Their number
of distinct values is at most O(2^D·τ·step/ulp) + the data's own atoms: τ ≥ ½ only when
the range holds O(2^D) floats.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._validation import check_interval_bounds
from dpfair.data._io import FileFormat, _check_path, _checked_column, _resolve_format, _source

__all__ = ["histogram_counts"]

_EDGE_TOLERANCE = 1e-6  # in units of one bin, on top of the rounding bound (module docstring)
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
    edges = leaf_edges((lo, hi), int(depth))  # the rule's public grid (checks hi − lo finite)
    width = hi - lo
    step = width / n_bins
    big = max(abs(lo), abs(hi))
    tol = _EDGE_TOLERANCE + 4.0 * (
        (math.ulp(big) + math.ulp(2.0 * big)) * n_bins / width + n_bins * 2.0**-53
    )
    with duckdb.connect(":memory:") as con:
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute("SET enable_progress_bar = false")
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        q = _checked_column(con, p, fmt, column)
        sql = f"""
            WITH src AS (SELECT CAST({q} AS DOUBLE) AS v FROM {_source(p, fmt)}),
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
            rows = con.execute(
                sql, {"lo": lo, "hi": hi, "step": step, "tol": tol}
            ).fetchall()
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
        idx = np.clip(np.searchsorted(edges, values, side="left") - 1, 0, n_bins - 1)
        np.add.at(counts, idx, cnt.astype(np.int64))
    return counts

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

Fast path (the default whenever τ ≤ ¼). A value within τ of grid point j = round(r) lies
strictly between g_{j−1} and g_{j+1} (τ plus the rounding error is below ½ bin), so the
rule's bin is j − 1 if x ≤ g_j and j otherwise: one exact comparison, done in SQL with
g_j = lo + W·(j/2^D) computed by the same two IEEE roundings as ``leaf_edges`` (j/2^D is
exact). That DuckDB's arithmetic reproduces every inner grid point bit for bit is checked
once per public (lo, hi, D); if it ever did not, or τ > ¼, the query above is used. The
fast query groups by one integer key (the bin, or a code for NULL and NaN/inf) and
returns at most 2^D + 2 rows, fetched as arrays: no per-value work in Python.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._validation import check_interval_bounds
from dpfair.data._io import FileFormat, _checked_column, _resolve_format, _source, check_path

__all__ = ["histogram_counts"]

_EDGE_TOLERANCE = 1e-6  # in units of one bin, on top of the rounding bound (module docstring)
_MAX_DEPTH = 24


#: Largest edge tolerance (bin units) for which the near-edge values are placed in SQL:
#: below it a value within τ of grid point j lies strictly between g_{j−1} and g_{j+1}.
_EXACT_IN_SQL_TOL = 0.25
_NULL_KEY, _NONFINITE_KEY = -10, -20


def _grouped_sql(q: str, source: str) -> str:
    """The general query: near-edge values are returned grouped by value (placed in numpy)."""
    return f"""
        WITH src AS (SELECT CAST({q} AS DOUBLE) AS v FROM {source}),
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


@functools.lru_cache(maxsize=64)
def _sql_grid_matches(lo: float, hi: float, depth: int) -> bool:
    """Whether DuckDB computes every inner grid point lo + W·(j/2^D) bit for bit as numpy.

    j/2^D is exact, so each point is two IEEE roundings (W·t, then lo + ·) in both
    engines; this checks it once per public (lo, hi, D) (an engine that fused or reordered
    them would fail the check, and the general query is used instead).
    """
    from dpfair.mechanisms import leaf_edges

    n_bins = 1 << depth
    with duckdb.connect(":memory:") as con:
        got = con.execute(
            "SELECT $lo + $width * (CAST(i AS DOUBLE) / $nbins) AS g FROM range(1, $nb) t(i) "
            "ORDER BY i",
            {"lo": lo, "width": hi - lo, "nbins": float(n_bins), "nb": n_bins},
        ).fetchnumpy()["g"]
    want = leaf_edges((lo, hi), depth)[1:-1]
    return bool(np.array_equal(np.asarray(got, dtype=np.float64), want))


def _keyed_counts(
    con: duckdb.DuckDBPyConnection, q: str, source: str, params: dict[str, float],
    width: float, n_bins: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(key, count) pairs of the one-key query: the rule's bin of every value, in SQL.

    A value with |r − round(r)| > τ is in bin floor(r) (module docstring). A value within
    τ of grid point j = round(r) lies strictly between g_{j−1} and g_{j+1} (τ plus the
    rounding error is below ½ bin), so the rule puts it in bin j − 1 if x ≤ g_j, else in
    bin j; g_j = lo + W·(j/2^D) is computed by the same two roundings as
    :func:`dpfair.mechanisms.leaf_edges` (checked by :func:`_sql_grid_matches`). Keys −1
    and 2^D (x at lo, or at hi past a rounded g_{2^D}) are clamped into 0 and 2^D − 1 by
    the caller: bin 0 holds lo and the last bin holds hi. NULL and NaN/inf get keys of
    their own. One integer key and ``count(*)``: DuckDB's cheapest aggregation.
    """
    sql = f"""
        WITH src AS (SELECT CAST({q} AS DOUBLE) AS v FROM {source}),
        placed AS (SELECT v, least(greatest(v, $lo), $hi) AS x FROM src),
        ranked AS (SELECT v, x, (x - $lo) / $step AS r FROM placed)
        SELECT CASE WHEN v IS NULL THEN {_NULL_KEY}
                    WHEN isnan(v) OR isinf(v) THEN {_NONFINITE_KEY}
                    WHEN abs(r - round(r)) > $tol THEN CAST(floor(r) AS BIGINT)
                    WHEN x <= $lo + $width * (round(r) / $nbins)
                        THEN CAST(round(r) AS BIGINT) - 1
                    ELSE CAST(round(r) AS BIGINT) END AS k,
               count(*) AS n
        FROM ranked
        GROUP BY k
    """
    out = con.execute(sql, {**params, "width": width, "nbins": float(n_bins)}).fetchnumpy()
    return (np.asarray(out["k"], dtype=np.int64), np.asarray(out["n"], dtype=np.int64))


def _finish(
    keyed: tuple[NDArray[np.int64], NDArray[np.int64]], n_bins: int, column: str, name: str
) -> NDArray[np.int64]:
    keys, cnt = keyed
    total = int(cnt.sum())
    if total == 0:
        raise InvalidDataError(f"column='{column}': '{name}' has no rows.")
    n_null = int(cnt[keys == _NULL_KEY].sum())
    n_bad = int(cnt[keys == _NONFINITE_KEY].sum())
    if n_null or n_bad:
        raise InvalidDataError(
            f"column='{column}': {n_null} missing (NULL) and {n_bad} NaN/infinite value(s) "
            f"among {total} rows. dpfair never drops rows silently: remove or impute them "
            "first."
        )
    if keys.min() < -1 or keys.max() > n_bins:  # cannot happen after clipping
        raise InvalidDataError("internal: a value fell outside the bins after clipping.")
    return _weighted_bincount(np.clip(keys, 0, n_bins - 1), cnt, n_bins)


def _weighted_bincount(
    idx: NDArray[np.int64], cnt: NDArray[np.int64], n_bins: int
) -> NDArray[np.int64]:
    """Exact integer Σ cnt per index (np.add.at: no float weights)."""
    out = np.zeros(n_bins, dtype=np.int64)
    np.add.at(out, idx, cnt)
    return out


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
    p = check_path(path)
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
        params = {"lo": lo, "hi": hi, "step": step, "tol": tol}
        try:
            if tol <= _EXACT_IN_SQL_TOL and _sql_grid_matches(lo, hi, int(depth)):
                return _finish(_keyed_counts(con, q, _source(p, fmt), params, width, n_bins),
                               n_bins, column, p.name)
            rows = con.execute(_grouped_sql(q, _source(p, fmt)), params).fetchall()
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

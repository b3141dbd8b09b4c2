"""DuckDB reading for paper 003's fits: Parquet copies, row counts, streamed batches, the
position-hash SQL of the split and the kernel-grid aggregates.

The classifiers of :mod:`dpfair.fairclass` read a file only through this module (and
:mod:`dpfair.data._io` / :mod:`dpfair.data.sql` for paths and identifiers); nothing here
knows a classifier. It returns plain arrays and :class:`GridAggregate`.

* :func:`read_columns` — several numeric columns of a small file as float64 arrays
  (nothing dropped silently: missing values, NaN and infinities are errors that say how
  many, because n is public in the privacy analysis);
* :func:`as_parquet` — the rows of a CSV/Parquet file in file order, as Parquet (a CSV is
  copied to a temporary file first; DuckDB keeps insertion order for a single-table
  ``COPY … SELECT`` while ``preserve_insertion_order = true``, which :func:`connect` sets);
* :func:`position_half_sql`, :func:`position_half_sizes`, :func:`position_labels` — the
  split's seeded degree-3 polynomial hash of the row position mod 2^61 − 1, in SQL
  (HUGEINT arithmetic: every product is < 2^122);
* :func:`kernel_grid_weights` — the exact integer linear-binning weights of the rows
  per (group, label) on a public grid, in one streaming GROUP BY (module docstring of
  :mod:`dpfair.fairclass.aggregate` for exactness and privacy);
* :func:`stream_batches` — the used columns of the rows of some halves (optionally the
  positive-label rows only) in Arrow record batches (memory O(batch));
* :func:`half_cell_counts` — rows per (half, group, label) in one aggregate query (the
  positive-label counts of equal opportunity's S2).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair.data._io import _quote, list_columns
from dpfair.data.sql import is_parquet, literal_pattern, sql_string
from dpfair.data.sql import scan as scan_sql
from dpfair.mechanisms import KroneckerGaussianGrid

__all__ = [
    "MERSENNE_61",
    "GridAggregate",
    "HalfSql",
    "as_parquet",
    "check_numeric_columns",
    "connect",
    "count_rows",
    "file_order_parquet",
    "group_label_counts",
    "half_cell_counts",
    "kernel_grid_weights",
    "literal",
    "position_half_sizes",
    "position_half_sql",
    "position_labels",
    "read_columns",
    "stream_batches",
]

#: The field of the position hash: p = 2^61 − 1.
MERSENNE_61 = (1 << 61) - 1
_HALF = (MERSENNE_61 - 1) // 2

#: DuckDB column types read as numbers (plus every DECIMAL(p, s)).
_NUMERIC = frozenset({
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "REAL", "DOUBLE", "BOOLEAN",
})


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def literal(path: Path) -> str:
    """``path`` as an SQL literal for *reading*: glob characters escaped, so DuckDB's
    ``read_parquet``/``read_csv`` read exactly that file (see :mod:`dpfair.data.sql`)."""
    return sql_string(literal_pattern(path))


def connect(memory_limit: str = "1GB", threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection: memory cap, no progress bar, insertion order kept."""
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = {sql_string(str(memory_limit))}")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = true")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    return con


def check_numeric_columns(
    con: duckdb.DuckDBPyConnection, source: str, name: str, columns: Sequence[str]
) -> None:
    """Raise unless every column of ``columns`` exists in ``source`` and is numeric."""
    try:
        schema = {
            str(r[0]): str(r[1])
            for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        }
    except duckdb.Error as exc:
        raise InvalidDataError(f"'{name}': could not be read ({_first_line(exc)}).") from None
    missing = [c for c in columns if c not in schema]
    if missing:
        raise InvalidParameterError(
            f"column(s) {', '.join(repr(c) for c in missing)}: not found in '{name}'. "
            f"Available columns: {', '.join(repr(c) for c in schema)}."
        )
    for c in columns:
        t = schema[c].upper()
        if not (t in _NUMERIC or t.startswith("DECIMAL")):
            raise InvalidDataError(
                f"column='{c}': has type {schema[c]}, expected a numeric column."
            )


@contextmanager
def as_parquet(
    path: Path,
    columns: Sequence[str],
    *,
    memory_limit: str,
    threads: int | None,
    tmp_dir: str | os.PathLike[str] | None,
) -> Iterator[tuple[Path, bool]]:
    """Yield (a Parquet file with the rows of ``path`` in file order, whether it was CSV)."""
    with path.open("rb") as fh:
        parquet = fh.read(4) == b"PAR1"
    with connect(memory_limit, threads) as con:
        source = scan_sql(path, "parquet" if parquet else "csv")
        check_numeric_columns(con, source, path.name, columns)
        if parquet:
            yield path, False
            return
        with tempfile.TemporaryDirectory(prefix="dpfair-csv-", dir=tmp_dir) as tmp:
            out = Path(tmp) / path.name  # same name: error messages name the user's file
            select = ", ".join(_quote(c) for c in columns)
            try:
                # COPY of a single-table SELECT keeps the CSV's row order
                # (preserve_insertion_order = true, set in connect).
                con.execute(
                    f"COPY (SELECT {select} FROM {source}) TO {sql_string(str(out))} "
                    "(FORMAT parquet, ROW_GROUP_SIZE 1000000)"
                )
            except duckdb.Error as exc:
                raise InvalidDataError(
                    f"'{path.name}': could not be read ({_first_line(exc)})."
                ) from None
            yield out, True


def count_rows(con: duckdb.DuckDBPyConnection, pq: Path) -> int:
    """Rows of a Parquet file (from its metadata)."""
    rows = con.execute(f"SELECT count(*) FROM read_parquet({literal(pq)})").fetchall()
    return int(rows[0][0])


def position_half_sql(coefficients: Sequence[int], position: str, cut: int = _HALF) -> str:
    """A DuckDB expression (INTEGER 0/1) for the half of the row at ``position``: 0 iff
    h(i) = c₃i³ + c₂i² + c₁i + c₀ (mod 2^61 − 1) is below ``cut`` ((p − 1)/2: halves).

    ``position`` is an SQL expression for the 0-based row number, e.g. DuckDB's
    ``file_row_number`` of ``read_parquet(..., file_row_number = true)``.
    """
    cut = int(cut)
    if not 0 < cut < MERSENNE_61:
        raise ValueError(f"cut={cut}: expected 0 < cut < 2^61 - 1.")
    x = f"CAST({position} AS HUGEINT)"
    h = f"CAST({int(coefficients[0])} AS HUGEINT)"
    for c in coefficients[1:]:
        h = f"(({h}) * {x} + {int(c)}) % {MERSENNE_61}"
    return f"(CASE WHEN {h} < {cut} THEN 0 ELSE 1 END)"


def _query_positions(sql: str) -> dict[str, Any]:
    """Run one query over ``range(…)`` on a fresh in-memory DuckDB; its columns as numpy."""
    with duckdb.connect(":memory:") as con:
        con.execute("SET enable_progress_bar = false")
        return dict(con.execute(sql).fetchnumpy())


def position_half_sizes(
    coefficients: Sequence[int], n: int, cut: int = _HALF
) -> tuple[int, int]:
    """(|half 0|, |half 1|) among positions 0..n−1 (one aggregate query, O(1) memory)."""
    expr = position_half_sql(coefficients, "range", cut)
    got = _query_positions(
        f"SELECT count(*) FILTER (WHERE {expr} = 0) AS h0, "
        f"count(*) FILTER (WHERE {expr} = 1) AS h1 FROM range({int(n)})"
    )
    return int(got["h0"][0]), int(got["h1"][0])


def position_labels(
    coefficients: Sequence[int], start: int, count: int, cut: int = _HALF
) -> NDArray[np.intp]:
    """The half (0/1) of positions ``start`` .. ``start + count − 1``, in order."""
    if int(count) <= 0:
        return np.zeros(0, dtype=np.intp)
    got = _query_positions(
        f"SELECT {position_half_sql(coefficients, 'range', cut)} AS half FROM "
        f"range({int(start)}, {int(start) + int(count)}) ORDER BY range"
    )
    return np.asarray(got["half"], dtype=np.intp)


def stream_batches(
    con: duckdb.DuckDBPyConnection,
    pq: Path,
    columns: Sequence[str],
    *,
    half_sql: str,
    only_half: int | None,
    batch_size: int,
    name: str,
    positive_of: str | None = None,
) -> Iterator[tuple[NDArray[np.float64], NDArray[np.intp]]]:
    """Arrow record batches of ``columns`` (as float64, shape (rows, k)) with each row's
    half (``half_sql`` of ``file_row_number``); ``only_half`` keeps the rows of one half,
    ``positive_of`` (a label column) only the rows whose label is 1 (equal opportunity's
    calibration rows). Row positions are those of the whole file either way.

    Memory O(batch). A DuckDB error is an :class:`InvalidDataError` naming the file.
    """
    cols = ", ".join(f"CAST({_quote(c)} AS DOUBLE)" for c in columns)
    conditions = [] if only_half is None else [f"{half_sql} = {int(only_half)}"]
    if positive_of is not None:
        conditions.append(f"CAST({_quote(positive_of)} AS DOUBLE) = 1")
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    source = scan_sql(pq, "parquet", file_row_number=True)
    sql = f"SELECT {cols}, {half_sql} AS half FROM {source} {where}"
    k = len(columns)
    try:
        # A relation's Arrow reader streams record batches (a DB-API result would copy all
        # rows first). DuckDB >= 2.0 names it to_arrow_reader, 1.x fetch_record_batch.
        rel = con.sql(sql)
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
        for batch in to_reader(batch_size):
            arr = np.column_stack(
                [batch.column(j).to_numpy(zero_copy_only=False) for j in range(k)]
            ).astype(np.float64, copy=False)
            half = batch.column(k).to_numpy(zero_copy_only=False).astype(np.intp)
            yield arr, half
    except duckdb.Error as exc:
        raise InvalidDataError(
            f"'{name}': could not stream the calibration rows ({_first_line(exc)})."
        ) from None


def group_label_counts(
    con: duckdb.DuckDBPyConnection,
    pq: Path,
    *,
    half_sql: str,
    target: str,
    sensitive: str,
    name: str,
) -> list[tuple[int, float, int, float | None, float | None]]:
    """Per (half, group value): the row count and the smallest and largest label, in one
    pass over the Parquet file ``pq`` (the FDP file site's start-up query).

    Rows are ``(half, group value as DOUBLE, count, min label, max label)``; the caller
    checks the values. A DuckDB error is an :class:`InvalidDataError` naming the file.
    """
    s, t = _quote(sensitive), _quote(target)
    try:
        rows = con.execute(
            f"SELECT {half_sql} AS h, CAST({s} AS DOUBLE) AS a, count(*), "
            f"min(CAST({t} AS DOUBLE)), max(CAST({t} AS DOUBLE)) "
            f"FROM {scan_sql(pq, 'parquet', file_row_number=True)} GROUP BY ALL"
        ).fetchall()
    except duckdb.Error as exc:
        raise InvalidDataError(f"'{name}': could not be read ({_first_line(exc)}).") from None
    return [(int(h), a, int(c), lo, hi) for h, a, c, lo, hi in rows]

def half_cell_counts(
    con: duckdb.DuckDBPyConnection,
    pq: Path,
    *,
    half_sql: str,
    target: str,
    sensitive: str,
    only_half: int | None,
    name: str,
) -> NDArray[np.int64]:
    """Rows per (half, group, label) of the Parquet file ``pq`` in one aggregate query
    (``only_half``: of that half only; the other half's counts are 0).

    The positive-label counts n_{a,1} of a calibration half are entries [h, a, 1]: inputs
    of a mechanism (equal opportunity's S2 counts), never to be published as such. A group
    or label that is not 0/1 (NULL included) is an :class:`InvalidDataError` naming the
    columns; a DuckDB error one naming the file.
    """
    s, t = _quote(sensitive), _quote(target)
    where = "" if only_half is None else f"WHERE {half_sql} = {int(only_half)}"
    try:
        rows = con.execute(
            f"SELECT {half_sql} AS h, CAST({s} AS DOUBLE) AS a, CAST({t} AS DOUBLE) AS y, "
            f"count(*) FROM {scan_sql(pq, 'parquet', file_row_number=True)} {where} "
            "GROUP BY ALL"
        ).fetchall()
    except duckdb.Error as exc:
        raise InvalidDataError(f"'{name}': could not be read ({_first_line(exc)}).") from None
    out = np.zeros((2, 2, 2), dtype=np.int64)
    for h, a, y, c in rows:
        if a not in (0.0, 1.0) or y not in (0.0, 1.0):
            raise InvalidDataError(
                f"'{name}': {target!r} and {sensitive!r} must be 0/1 without missing values."
            )
        out[int(h), int(a), int(y)] += int(c)
    return out


class HalfSql(Protocol):
    """A position split as SQL: the half (0/1) of the row at ``position``."""

    def sql(self, position: str) -> str:
        """An SQL expression of the 0-based row number ``position``."""
        ...


@dataclass(frozen=True)
class GridAggregate:
    """Per-(group, label) linear-binning weights of some rows on a public grid.

    Attributes
    ----------
    weights : ndarray of shape ``grid.shape + (2, 2)``
        W[..., a, y]: the exact integer linear binning (fractions rounded to multiples of
        2^-q) divided by 2^{q·d}, so it carries no summation error.
        ``grid.kernel_apply(weights)`` is the four kernel sums F_{a,y} of S1.
    counts : ndarray of shape (2, 2), int64
        Rows per (a, y) (inputs of a mechanism, never to be published as such).
    n : int
        Rows aggregated.
    bits : int
        The q of the integer binning.
    """

    weights: NDArray[np.float64]
    counts: NDArray[np.int64]
    n: int
    bits: int = 0

    def kernel_sums(self, grid: KroneckerGaussianGrid) -> NDArray[np.float64]:
        """F_{a,y} on the grid: ``grid.kernel_apply(weights)``."""
        return grid.kernel_apply(self.weights)


def kernel_grid_weights(
    path: str | os.PathLike[str],
    features: Sequence[str],
    target: str,
    sensitive: str,
    feature_bounds: Sequence[tuple[float, float]],
    grid: KroneckerGaussianGrid,
    *,
    clip: bool = False,
    memory_limit: str = "1GB",
    threads: int | None = None,
    half: tuple[HalfSql, int] | None = None,
    bits: int | None = None,
) -> GridAggregate:
    """Linear-binning weights of a CSV/Parquet file per (group, label), out of core.

    Parameters
    ----------
    path : str or path-like
        CSV or Parquet file of any size (DuckDB streams it; Parquet detected by its magic).
    features : sequence of str
        Feature columns, in the order of ``feature_bounds`` and the grid's axes.
    target, sensitive : str
        0/1 label and 0/1 group columns.
    feature_bounds : sequence of (lo, hi)
        The public box; features are mapped to [0, 1] with it.
    grid : KroneckerGaussianGrid
        The classifier's public grid on [0, 1]^d with equally spaced nodes (its ``grid_``
        after a fit).
    clip : bool, default=False
        Clip features into the box; otherwise values outside are an error.
    memory_limit : str, default="1GB"
        DuckDB's memory cap (it spills beyond it).
    threads : int, optional
        DuckDB worker threads.
    half : (split, 0 or 1), optional
        Aggregate only the rows of this half of a position split — any object with a
        ``sql(position)`` method giving the half of a row as an SQL expression, e.g.
        :class:`dpfair.fairclass._split.PositionSplit` (Parquet only: the position is
        DuckDB's ``file_row_number``). *Every* row of the file is still validated, so an
        error counts the problems of the whole file.
    bits : int, optional
        Fractional bits q of the exact integer linear binning (each row adds exactly
        2^{q·d}; ``KroneckerGaussianGrid.binning_bits`` of the public row count). Default:
        the value for 2^40 rows.

    Returns
    -------
    GridAggregate
        With ``half``: weights, counts and n of that half's rows only.

    Raises
    ------
    InvalidDataError
        NULL/NaN/infinite values, labels or groups not 0/1, features outside the box
        (without ``clip``), no rows — counted in the message; nothing is dropped silently.
    InvalidParameterError
        Missing file, mismatched features/bounds/grid, a grid that is not uniform on [0, 1].
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameterError(f"path='{p}': no such file.")
    d = len(features)
    if d == 0 or len(feature_bounds) != d or grid.ndim != d:
        raise InvalidParameterError(
            f"features: {d} name(s), {len(feature_bounds)} bound pair(s) and a "
            f"{grid.ndim}-d grid; they must match."
        )
    sizes = []
    for j, ax in enumerate(grid.axes):
        if ax[0] != 0.0 or ax[-1] != 1.0 or not np.allclose(
            ax, np.linspace(0.0, 1.0, ax.size), rtol=0, atol=1e-15
        ):
            raise InvalidParameterError(
                f"grid.axes[{j}]: expected equally spaced nodes from 0 to 1 (the classifier's "
                "public grid)."
            )
        sizes.append(ax.size)
    lows = [float(lo) for lo, _ in feature_bounds]
    highs = [float(hi) for _, hi in feature_bounds]
    if not all(np.isfinite(lo) and np.isfinite(hi) and lo < hi
               for lo, hi in zip(lows, highs, strict=True)):
        raise InvalidParameterError(f"feature_bounds={list(feature_bounds)!r}: need lo < hi.")

    keep = "TRUE"
    if half is not None:
        split, which = half
        if not callable(getattr(split, "sql", None)) or which not in (0, 1):
            raise InvalidParameterError(
                "half: expected (a position split such as PositionSplit, 0 or 1)."
            )
        expr = split.sql("file_row_number")
        if not is_parquet(p):
            raise InvalidParameterError(
                f"'{p.name}': a half of the position split needs a Parquet file (row positions "
                "come from DuckDB's file_row_number); convert CSV to Parquet first."
            )
        keep = f"{expr} = {int(which)}"

    fq = [_quote(f) for f in features]
    u_exprs = [
        f"(CAST({q} AS DOUBLE) - {lo!r}) / ({hi!r} - {lo!r})"
        for q, lo, hi in zip(fq, lows, highs, strict=True)
    ]
    bad_checks = " OR ".join(
        [f"{q} IS NULL OR isnan(CAST({q} AS DOUBLE)) OR isinf(CAST({q} AS DOUBLE))"
         for q in fq]
    )
    u_cols = ", ".join(
        (f"least(greatest({e}, 0.0), 1.0) AS u{j}" if clip else f"{e} AS u{j}")
        for j, e in enumerate(u_exprs)
    )
    outside = " OR ".join(f"u{j} < 0.0 OR u{j} > 1.0" for j in range(d))
    cell_cols = ", ".join(
        f"CAST(least(greatest(floor(u{j} * {g - 1}), 0), {g - 2}) AS BIGINT) AS i{j}"
        for j, g in enumerate(sizes)
    )
    q_bits = int(bits) if bits is not None else KroneckerGaussianGrid.binning_bits(2**40, d)
    one = 1 << q_bits
    # The fraction rounded to a multiple of 2^-q (same IEEE operations as
    # dpfair.mechanisms.gaussian_process.quantize_fraction), corner weights as exact integers.
    frac_cols = ", ".join(
        f"CAST(least(greatest(floor(least(greatest(u{j} * {g - 1} - i{j}, 0.0), 1.0) * "
        f"{float(one)!r} + 0.5), 0), {one}) AS BIGINT) AS f{j}" for j, g in enumerate(sizes)
    )
    corners = []
    for c in range(1 << d):
        factors = [
            (f"f{j}" if (c >> (d - 1 - j)) & 1 else f"({one} - f{j})") for j in range(d)
        ]
        corners.append(f"CAST(sum({' * '.join(factors)}) AS BIGINT) AS w{c}")
    a_q, y_q = _quote(sensitive), _quote(target)
    i_list = ", ".join(f"i{j}" for j in range(d))
    sql = f"""
        WITH src AS (SELECT * FROM {scan_sql(p, file_row_number=half is not None)}),
        checked AS (
            SELECT CASE WHEN {bad_checks} OR {a_q} IS NULL OR {y_q} IS NULL THEN 'missing'
                        WHEN CAST({a_q} AS DOUBLE) NOT IN (0, 1)
                             OR CAST({y_q} AS DOUBLE) NOT IN (0, 1) THEN 'notbinary'
                        ELSE 'ok' END AS kind,
                   CAST({a_q} AS DOUBLE) AS a, CAST({y_q} AS DOUBLE) AS y,
                   ({keep}) AS keep,
                   {', '.join(f'{q}' for q in fq)}
            FROM src),
        unit AS (SELECT kind, a, y, keep, {u_cols} FROM checked WHERE kind = 'ok'),
        flagged AS (SELECT *, ({outside}) AS out FROM unit),
        cells AS (SELECT a, y, {', '.join(f'u{j}' for j in range(d))}, {cell_cols}
                  FROM flagged WHERE NOT out AND keep),
        fracs AS (SELECT a, y, {i_list}, {frac_cols} FROM cells)
        SELECT 'ok' AS kind, CAST(a AS INTEGER) AS a, CAST(y AS INTEGER) AS y, {i_list},
               count(*) AS n, {', '.join(corners)}
        FROM fracs GROUP BY a, y, {i_list}
        UNION ALL
        SELECT kind, NULL, NULL, {', '.join('NULL' for _ in range(d))}, count(*),
               {', '.join('NULL' for _ in range(1 << d))}
        FROM checked WHERE kind <> 'ok' GROUP BY kind
        UNION ALL
        SELECT 'outside', NULL, NULL, {', '.join('NULL' for _ in range(d))}, count(*),
               {', '.join('NULL' for _ in range(1 << d))}
        FROM flagged WHERE out
    """
    with connect(memory_limit, threads) as con:
        try:
            rows = con.execute(sql).fetchall()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            raise InvalidDataError(
                f"'{p.name}': could not aggregate columns {[*features, target, sensitive]} "
                f"({first})."
            ) from None
    problems = {str(r[0]): int(r[3 + d]) for r in rows if r[0] != "ok" and int(r[3 + d]) > 0}
    if problems:
        parts = []
        if "missing" in problems:
            parts.append(f"{problems['missing']} row(s) with NULL/NaN/infinite values")
        if "notbinary" in problems:
            parts.append(f"{problems['notbinary']} row(s) whose {target!r} or {sensitive!r} "
                         "is not 0/1")
        if "outside" in problems:
            parts.append(f"{problems['outside']} row(s) with a feature outside its public "
                         "bounds (widen feature_bounds or pass clip=True)")
        raise InvalidDataError(
            f"'{p.name}': " + "; ".join(parts) + ". dpfair never drops rows silently."
        )
    ok = [r for r in rows if r[0] == "ok"]
    if not ok:
        where = "" if half is None else f" in half {half[1]} of the split"
        raise InvalidDataError(f"'{p.name}': no rows{where}.")
    arr = np.array([r[1:] for r in ok], dtype=np.int64)
    a_idx, y_idx = arr[:, 0].astype(np.intp), arr[:, 1].astype(np.intp)
    cells = arr[:, 2 : 2 + d].astype(np.intp)
    counts = np.zeros((2, 2), dtype=np.int64)
    np.add.at(counts, (a_idx, y_idx), arr[:, 2 + d])
    wts = arr[:, 3 + d :]
    shape = tuple(sizes)
    strides = np.array([int(np.prod(shape[j + 1 :])) for j in range(d)], dtype=np.intp)
    flat = np.zeros((int(np.prod(shape)), 2, 2), dtype=np.int64)
    for c in range(1 << d):
        corner = np.array([(c >> (d - 1 - j)) & 1 for j in range(d)], dtype=np.intp)
        node = ((cells + corner) * strides).sum(axis=1)
        np.add.at(flat, (node, a_idx, y_idx), wts[:, c])
    weights = flat.reshape((*shape, 2, 2)).astype(np.float64) / float(one) ** d
    return GridAggregate(weights, counts, int(counts.sum()), q_bits)


def read_columns(
    path: str | os.PathLike[str], columns: Sequence[str]
) -> dict[str, NDArray[np.float64]]:
    """Numeric columns of a CSV (optionally .gz) or Parquet file as float64 arrays.

    Parameters
    ----------
    path : str or path-like
        The file; Parquet is recognised by its magic bytes, anything else is read as CSV
        (DuckDB sniffs the delimiter and header).
    columns : sequence of str
        Exact column names.

    Returns
    -------
    dict of str to ndarray
        One float64 array per requested column, in file order.

    Raises
    ------
    InvalidParameterError
        Missing file, or a column that is not in the file (the message lists them).
    InvalidDataError
        Unreadable file, non-numeric column, missing values, NaN or inf.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidParameterError(f"path={path!r}: expected a file path.")
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameterError(f"path='{p}': no such file. Check the path and try again.")
    names = [str(c) for c in columns]
    if not names:
        raise InvalidParameterError("columns: at least one column name is required.")
    source = scan_sql(p)  # the file itself: glob characters in its name are literal
    with duckdb.connect(":memory:") as con:
        check_numeric_columns(con, source, p.name, names)
        select = ", ".join(f"CAST({_quote(c)} AS DOUBLE) AS {_quote(c)}" for c in names)
        try:
            fetched = con.execute(f"SELECT {select} FROM {source}").fetchnumpy()
        except duckdb.Error as exc:
            raise InvalidDataError(
                f"path='{p}': could not be read as numbers ({_first_line(exc)})."
            ) from None
    out: dict[str, NDArray[np.float64]] = {}
    for c in names:
        col = fetched[c]
        n_missing = int(np.ma.count_masked(col)) if np.ma.isMaskedArray(col) else 0
        values = np.ma.getdata(col).astype(np.float64, copy=False)
        if values.size == 0:
            raise InvalidDataError(f"'{p.name}' has no rows.")
        if n_missing:
            raise InvalidDataError(
                f"column='{c}': {n_missing} of {values.size} rows are missing. dpfair never "
                "drops rows silently: remove or impute them first."
            )
        if not np.all(np.isfinite(values)):
            raise InvalidDataError(
                f"column='{c}': contains NaN or infinite values; remove or impute them first."
            )
        out[c] = np.ascontiguousarray(values)
    return out


# ----------------------------------------------------------- the FDP file site's copy
#: DuckDB types a feature, label or group column may have (cast to DOUBLE when read).
_NUMERIC_PREFIXES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "BOOLEAN")


def _check_file_columns(path: Path, columns: Sequence[str]) -> None:
    """Every column present and numeric (the error names the first bad column)."""
    schema = list_columns(path, format="parquet" if is_parquet(path) else "csv")
    for c in columns:
        kind = schema.get(c)
        if kind is None:
            raise InvalidParameterError(
                f"column {c!r}: not found in '{path.name}' (its columns: {list(schema)})."
            )
        if not kind.upper().startswith(_NUMERIC_PREFIXES):
            raise InvalidDataError(f"column {c!r} of '{path.name}' is {kind}, not numeric.")


@contextmanager
def file_order_parquet(
    path: Path,
    columns: Sequence[str],
    *,
    memory_limit: str,
    threads: int | None,
    tmp_dir: str | os.PathLike[str] | None,
) -> Iterator[tuple[Path, bool]]:
    """Yield (a Parquet file with the rows of ``path`` in file order, whether it is a copy).

    A Parquet file is used as it is; a CSV file is copied (the used columns only) to a
    temporary Parquet file of the same name, removed on exit.
    """
    _check_file_columns(path, columns)
    if is_parquet(path):
        yield path, False
        return
    with tempfile.TemporaryDirectory(prefix="dpfair-fdp-", dir=tmp_dir) as tmp:
        out = Path(tmp) / path.name  # same name: error messages name the user's file
        select = ", ".join(_quote(c) for c in columns)
        with connect(memory_limit, threads) as con:
            try:
                # COPY of one single-table SELECT keeps the CSV's row order
                # (preserve_insertion_order = true).
                con.execute(
                    f"COPY (SELECT {select} FROM {scan_sql(path, 'csv')}) TO "
                    f"{sql_string(str(out))} (FORMAT parquet, ROW_GROUP_SIZE 1000000)"
                )
            except duckdb.Error as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise InvalidDataError(f"'{path.name}': could not be read ({first}).") from None
        yield out, True

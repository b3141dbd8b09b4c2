"""Read one numeric column from a CSV or Parquet file through DuckDB.

DuckDB streams the file, so only the requested column is materialised in memory (as one
float64 array). Nothing is ever dropped silently: missing values, NaN and infinities are
counted and reported as an error, because deciding how to treat them is the analyst's
call, and a silent drop would change n, which the privacy analysis treats as public.

These messages are for the data owner, who may see the data. Every error also carries
``problem`` (its kind, no value or count) and ``column`` attributes; a
:class:`~dpfair.Session` (and so every ``dpfair`` data command) shows only those, and
charges the failure (THREATS.md rule 9). All DuckDB access goes through
:mod:`dpfair.data.sql`.
"""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.data.sql import connect, data_error, scan, sniff, translate
from dpfair.data.sql import quote as _quote

__all__ = ["FileFormat", "detect_format", "list_columns", "read_column"]

FileFormat = Literal["csv", "parquet"]

_NUMERIC_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "FLOAT",
        "REAL",
        "DOUBLE",
    }
)


def check_path(path: str | os.PathLike[str]) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidParameterError(f"path={path!r}: expected a file path (str or Path).")
    p = Path(path).expanduser()
    if not p.exists():
        hint = (
            " Paths are read literally: glob patterns (*, ?, [...]) are not expanded."
            if any(c in str(p) for c in "*?[")
            else ""
        )
        raise InvalidParameterError(
            f"path='{p}': no such file. Check the path and try again.{hint}"
        )
    if not p.is_file():
        raise InvalidParameterError(f"path='{p}': not a regular file (a directory?).")
    return p


def detect_format(path: str | os.PathLike[str]) -> FileFormat:
    """Tell Parquet from CSV by the file's magic bytes (not its name).

    Parameters
    ----------
    path : str or path-like
        An existing file.

    Returns
    -------
    {"csv", "parquet"}
        ``"parquet"`` if the file starts with the Parquet magic ``PAR1``, else ``"csv"``
        (DuckDB's CSV reader also handles ``.gz`` and ``.zst`` compression, by file
        extension, and sniffs the delimiter and the header).
    """
    p = check_path(path)
    return sniff(p)


def _source(p: Path, fmt: FileFormat) -> str:
    """The table function reading exactly ``p`` (no glob expansion; see data.sql)."""
    return scan(p, fmt)


def _resolve_format(p: Path, fmt: str | None) -> FileFormat:
    if fmt is None:
        return detect_format(p)
    if fmt not in ("csv", "parquet"):
        raise InvalidParameterError(f"format={fmt!r}: expected 'csv', 'parquet' or None (detect).")
    return "csv" if fmt == "csv" else "parquet"


def _describe(con: duckdb.DuckDBPyConnection, p: Path, fmt: FileFormat) -> list[tuple[str, str]]:
    if p.stat().st_size == 0:
        raise data_error(f"path='{p}': the file is empty.", problem="the file is empty")
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {_source(p, fmt)}").fetchall()
    except duckdb.Error as exc:
        raise translate(exc, p, fmt=fmt) from None
    return [(str(r[0]), str(r[1])) for r in rows]


def list_columns(
    path: str | os.PathLike[str], *, format: FileFormat | None = None
) -> dict[str, str]:
    """Column names of a CSV or Parquet file with their DuckDB types.

    Parameters
    ----------
    path : str or path-like
        CSV (optionally compressed) or Parquet file.
    format : {"csv", "parquet"} or None, default=None
        ``None`` detects the format from the file's first bytes.

    Returns
    -------
    dict of str to str
        ``{column name: DuckDB type}`` in file order.
    """
    p = check_path(path)
    fmt = _resolve_format(p, format)
    with connect() as con:
        return dict(_describe(con, p, fmt))


def _is_numeric(duck_type: str) -> bool:
    t = duck_type.upper()
    return t in _NUMERIC_TYPES or t.startswith("DECIMAL")


def _checked_column(
    con: duckdb.DuckDBPyConnection, p: Path, fmt: FileFormat, column: str
) -> str:
    """Raise unless ``column`` exists and is numeric; return its quoted identifier."""
    schema = dict(_describe(con, p, fmt))
    if column not in schema:
        hint = ""
        close = difflib.get_close_matches(column, list(schema), n=1, cutoff=0.6)
        folded = [c for c in schema if c.lower() == column.lower()]
        if folded or close:
            hint = f" Did you mean '{(folded or close)[0]}'?"
        available = ", ".join(f"'{c}'" for c in schema)
        raise InvalidParameterError(
            f"column='{column}': not found in '{p.name}'. Available columns: {available}.{hint}"
        )
    duck_type = schema[column]
    q = _quote(column)
    if not _is_numeric(duck_type):
        try:
            n_rows, n_values = con.execute(
                f"SELECT count(*), count({q}) FROM {_source(p, fmt)}"
            ).fetchone() or (0, 0)
        except duckdb.Error as exc:
            raise translate(exc, p, column=column) from None
        if n_rows == 0:
            raise data_error(f"column='{column}': '{p.name}' has no rows.",
                             problem="the file has no rows", column=column)
        if n_values == 0:
            raise data_error(
                f"column='{column}': all {n_rows} rows are missing (NULL or empty).",
                problem="missing values", column=column,
            )
        detail = ""
        if duck_type.upper() == "VARCHAR":
            examples = con.execute(
                f"SELECT DISTINCT {q} FROM {_source(p, fmt)} WHERE {q} IS NOT NULL AND "
                f"TRY_CAST({q} AS DOUBLE) IS NULL LIMIT 3"
            ).fetchall()
            if examples:
                shown = ", ".join(repr(e[0]) for e in examples)
                detail = (
                    f" Non-numeric entries include {shown}; if they mark missing values, "
                    "clean or impute them first."
                )
        raise data_error(
            f"column='{column}': has type {duck_type}, expected a numeric column.{detail}",
            problem="non-numeric entries", column=column,
        )
    return q


def read_column(
    path: str | os.PathLike[str], column: str, *, format: FileFormat | None = None
) -> NDArray[np.float64]:
    """Read one numeric column of a CSV or Parquet file as a float64 array.

    Parameters
    ----------
    path : str or path-like
        CSV file (delimiter and header sniffed by DuckDB; ``.gz``/``.zst`` compression
        recognised by extension) or Parquet file.
    column : str
        Exact column name (case-sensitive).
    format : {"csv", "parquet"} or None, default=None
        ``None`` detects Parquet by its magic bytes and treats anything else as CSV.

    Returns
    -------
    ndarray of shape (n,), dtype float64
        The column in file order, every value finite.

    Raises
    ------
    InvalidParameterError
        The file does not exist, or ``column`` is not one of its columns (the message
        lists the available columns), or ``format`` is unknown.
    InvalidDataError
        The file cannot be parsed, the column is not numeric, it has no rows, or it holds
        missing values (NULL / empty cells), NaN or infinities. The message gives how
        many: rows are never dropped silently, because n is a public quantity in the
        privacy analysis and imputing or dropping is a choice the analyst must make.

    Examples
    --------
    >>> from dpfair.data import bundled_path, read_column
    >>> age = read_column(bundled_path("adult_age"), "age")
    >>> age.dtype, age.shape
    (dtype('float64'), (48842,))
    """
    p = check_path(path)
    if not isinstance(column, str) or not column:
        raise InvalidParameterError(f"column={column!r}: expected a non-empty column name.")
    fmt = _resolve_format(p, format)
    with connect() as con:
        q = _checked_column(con, p, fmt, column)
        try:
            fetched = con.execute(
                f"SELECT CAST({q} AS DOUBLE) AS v FROM {_source(p, fmt)}"
            ).fetchnumpy()["v"]
        except duckdb.Error as exc:
            raise translate(exc, p, column=column) from None
    # A masked array (DuckDB's NULLs) can only exist once numpy.ma is imported: checking
    # sys.modules first spares every clean read that import (~7 ms of CLI start-up).
    masked = "numpy.ma" in sys.modules and np.ma.isMaskedArray(fetched)
    n_missing = int(np.ma.count_masked(fetched)) if masked else 0
    values = (np.ma.getdata(fetched) if masked else np.asarray(fetched)).astype(
        np.float64, copy=False
    )
    if values.size == 0:
        raise data_error(f"column='{column}': '{p.name}' has no rows.",
                         problem="the file has no rows", column=column)
    if n_missing:
        raise data_error(
            f"column='{column}': {n_missing} of {values.size} rows are missing (NULL or "
            "empty). dpfair never drops rows silently: remove or impute them first.",
            problem="missing values", column=column,
        )
    bad = ~np.isfinite(values)
    if bad.any():
        n_nan = int(np.isnan(values).sum())
        n_inf = int(bad.sum()) - n_nan
        raise data_error(
            f"column='{column}': {n_nan} NaN and {n_inf} infinite value(s) among "
            f"{values.size} rows. dpfair never drops rows silently: remove or impute them "
            "first.",
            problem="NaN or infinite values", column=column,
        )
    return np.ascontiguousarray(values)

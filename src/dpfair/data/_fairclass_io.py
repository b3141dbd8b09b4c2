"""Read several numeric columns of a CSV or Parquet file through DuckDB (paper 003's
loaders and command-line tools; moved here from ``fairclass/_io.py``).

Nothing is dropped silently: missing values, NaN and infinities are errors that say how many,
because n is public in the privacy analysis and dropping rows is the analyst's decision.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._sqlpath import scan_sql
from dpfair.data._io import _quote

__all__ = ["read_columns"]

_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "FLOAT",
    "REAL",
    "DOUBLE",
    "BOOLEAN",
)


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
        try:
            schema = dict(
                (str(r[0]), str(r[1]))
                for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
            )
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InvalidDataError(f"path='{p}': could not be read ({first}).") from None
        missing = [c for c in names if c not in schema]
        if missing:
            raise InvalidParameterError(
                f"column(s) {', '.join(repr(c) for c in missing)}: not found in '{p.name}'. "
                f"Available columns: {', '.join(repr(c) for c in schema)}."
            )
        for c in names:
            t = schema[c].upper()
            if not (t in _NUMERIC or t.startswith("DECIMAL")):
                raise InvalidDataError(
                    f"column='{c}': has type {schema[c]}, expected a numeric column."
                )
        select = ", ".join(f"CAST({_quote(c)} AS DOUBLE) AS {_quote(c)}" for c in names)
        try:
            fetched = con.execute(f"SELECT {select} FROM {source}").fetchnumpy()
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InvalidDataError(f"path='{p}': could not be read as numbers ({first}).") from None
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

"""The FDP file site's DuckDB access: a configured connection and a file-order Parquet copy.

A small adapter so that :mod:`~dpfair.fairclass.federated._filesite` reads files through
public or shared names only (:func:`dpfair.data.list_columns`, :mod:`dpfair.data.sql`)
instead of the out-of-core CDP fit's private helpers. Nothing here releases anything: it
only reads the site's own file, in the site's own process.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair.data import list_columns
from dpfair.data.sql import is_parquet, sql_string
from dpfair.data.sql import scan as scan_sql

__all__ = ["connect", "file_order_parquet", "quote"]

#: DuckDB types a feature, label or group column may have (cast to DOUBLE when read).
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "BOOLEAN")


def quote(identifier: str) -> str:
    """``identifier`` as a DuckDB quoted identifier."""
    return '"' + identifier.replace('"', '""') + '"'


def connect(memory_limit: str, threads: int | None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that spills beyond ``memory_limit`` and keeps row
    order (``preserve_insertion_order``: positions, hence the split, stay the file's)."""
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = {sql_string(str(memory_limit))}")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = true")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    return con


def _check_columns(path: Path, columns: Sequence[str]) -> None:
    """Every column present and numeric (the error names the first bad column)."""
    schema = list_columns(path, format="parquet" if is_parquet(path) else "csv")
    for c in columns:
        kind = schema.get(c)
        if kind is None:
            raise InvalidParameterError(
                f"column {c!r}: not found in '{path.name}' (its columns: {list(schema)})."
            )
        if not kind.upper().startswith(_NUMERIC):
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
    _check_columns(path, columns)
    if is_parquet(path):
        yield path, False
        return
    with tempfile.TemporaryDirectory(prefix="dpfair-fdp-", dir=tmp_dir) as tmp:
        out = Path(tmp) / path.name  # same name: error messages name the user's file
        select = ", ".join(quote(c) for c in columns)
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

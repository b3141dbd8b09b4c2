"""Hand a user's file to DuckDB *literally*: no globbing, no hive columns, no name sniffing.

DuckDB's ``read_csv``/``read_parquet`` treat ``*``, ``?`` and ``[...]`` in a path as a glob,
so a file named ``data[2023].csv`` would silently read a sibling ``data2.csv`` and
``week?.csv`` every ``week1.csv``, ``week2.csv``, ... — a different data set, a different n,
a different privacy analysis. Every reader in dpfair builds its table function with
:func:`scan_sql`, which

* escapes each glob metacharacter as a one-character class (``[`` → ``[[]``, ``?`` →
  ``[?]``, ``*`` → ``[*]``), so the pattern matches exactly the file named (DuckDB's glob
  has no other escape);
* uses the absolute path (a leading ``~`` of a relative name is not expanded);
* turns off hive partitioning (a directory ``key=value`` would otherwise add a column);
* gives a CSV's compression from its magic bytes (gzip, zstd, else none) rather than letting
  DuckDB guess from the name, which it cuts at a ``?`` as if it were a URL query.

Globs are therefore never expanded: a user who wants several files combines them first.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

__all__ = ["csv_compression", "is_parquet", "literal_pattern", "scan_sql", "sql_string"]

_GLOB_CHARS = re.compile(r"([\[*?])")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_PARQUET_MAGIC = b"PAR1"


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def literal_pattern(path: str | os.PathLike[str]) -> str:
    """The absolute path of ``path`` as a DuckDB glob pattern matching only that file."""
    return _GLOB_CHARS.sub(r"[\1]", os.path.abspath(os.fspath(path)))


def _head(path: Path, n: int) -> bytes:
    with path.open("rb") as fh:
        return fh.read(n)


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with the Parquet magic bytes ``PAR1``."""
    return _head(Path(path), 4) == _PARQUET_MAGIC


def csv_compression(path: str | os.PathLike[str]) -> Literal["gzip", "zstd", "none"]:
    """The compression of a CSV file, read from its first bytes."""
    head = _head(Path(path), 4)
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head == _ZSTD_MAGIC:
        return "zstd"
    return "none"


def scan_sql(
    path: str | os.PathLike[str],
    fmt: Literal["csv", "parquet"] | None = None,
    *,
    file_row_number: bool = False,
) -> str:
    """SQL text of the DuckDB table function reading exactly the file ``path``.

    Parameters
    ----------
    path : str or path-like
        An existing file (its name may hold ``[``, ``?``, ``*``, quotes, ...).
    fmt : {"csv", "parquet"} or None, default=None
        ``None`` detects Parquet by its magic bytes and reads anything else as CSV.
    file_row_number : bool, default=False
        Parquet only: add DuckDB's ``file_row_number`` column (0-based row position).

    Returns
    -------
    str
        e.g. ``read_csv('/data/x[[]1].csv', hive_partitioning = false, compression =
        'none')``: a complete table function, to use after ``FROM`` (no bound parameters,
        so a ``?`` in a column name elsewhere in the query is harmless).
    """
    if fmt is None:
        fmt = "parquet" if is_parquet(path) else "csv"
    lit = sql_string(literal_pattern(path))
    if fmt == "parquet":
        rows = ", file_row_number = true" if file_row_number else ""
        return f"read_parquet({lit}, hive_partitioning = false{rows})"
    if file_row_number:
        raise ValueError("file_row_number is only available for Parquet files")
    comp = sql_string(csv_compression(path))
    return f"read_csv({lit}, hive_partitioning = false, compression = {comp})"

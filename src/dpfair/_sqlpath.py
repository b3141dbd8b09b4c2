"""Hand a user's file to DuckDB *literally* (kept for its importers).

The implementation is :mod:`dpfair.data._duckdb`, the one DuckDB module: it escapes glob
metacharacters, turns off hive partitioning, reads a CSV's compression from its magic bytes
and its encoding (UTF-8, UTF-16, Latin-1) from its first bytes. These names are re-exported
unchanged: :func:`scan_sql` is :func:`dpfair.data._duckdb.scan`.
"""

from __future__ import annotations

from dpfair.data._duckdb import csv_compression, is_parquet, literal_pattern, sql_string
from dpfair.data._duckdb import scan as scan_sql

__all__ = ["csv_compression", "is_parquet", "literal_pattern", "scan_sql", "sql_string"]

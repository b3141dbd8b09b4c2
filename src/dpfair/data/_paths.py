"""Choosing the in-memory or the out-of-core path from public facts only.

The in-memory and out-of-core fits are both private, but they are *different*
mechanisms (different random splits, score or bin rounding), so which one ran is visible
in the release. The choice must therefore depend on public facts only. A file's size in
bytes is not one: it depends on the values (CSV digit counts, Parquet compression), and two
neighbouring files can fall on either side of a byte threshold (found by the attack review
of issue 11). The number of rows is public under replace-one neighbours (n is public), so
``aggregate="auto"`` decides by it.
"""

from __future__ import annotations

import os

from dpfair._errors import InvalidParameterError
from dpfair.data import sql
from dpfair.data._io import _resolve_format, check_path

__all__ = ["AGGREGATE_ROWS", "row_count", "use_out_of_core"]

#: ``aggregate="auto"`` reads files with more rows than this out of core (2^24 ≈ 16.8
#: million rows: about 256 MiB of a narrow CSV).
AGGREGATE_ROWS = 2**24


def row_count(path: str | os.PathLike[str]) -> int:
    """Number of rows of a CSV or Parquet file (DuckDB; Parquet from its metadata).

    Public under replace-one neighbours, so it may steer public choices. A file DuckDB
    cannot read raises a one-line :class:`~dpfair.InvalidDataError` (no traceback).
    """
    p = check_path(path)
    return sql.row_count(p, _resolve_format(p, None))


def use_out_of_core(path: str | os.PathLike[str], aggregate: str) -> bool:
    """Whether ``aggregate`` ("auto" | "always" | "never") means the out-of-core path.

    "auto" is decided by :func:`row_count` > :data:`AGGREGATE_ROWS`, never by the file's
    size in bytes (module docstring).
    """
    if aggregate not in ("auto", "always", "never"):
        raise InvalidParameterError(
            f"aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
        )
    if aggregate != "auto":
        return aggregate == "always"
    return row_count(path) > AGGREGATE_ROWS

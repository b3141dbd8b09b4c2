"""The data owner's look at the bad rows of one column: NOT a differentially private release.

``dpfair inspect DATA --column C`` (and :func:`inspect_column`) lists the rows that a
release would refuse — missing cells, entries that are not numbers, NaN and infinities —
with their row number and raw text. It reads the data in the clear and prints values,
row numbers and counts: it is for the person who already holds the file (to clean it), and
it spends no budget because it is not a release. Nothing it prints may be handed to
someone the budget protects the data from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from dpfair._errors import InvalidParameterError
from dpfair.data import sql

__all__ = ["ColumnInspection", "inspect_column"]


@dataclass(frozen=True)
class ColumnInspection:
    """What :func:`inspect_column` found (values of the file, in the clear).

    Attributes
    ----------
    path, column : str
        The file and the column.
    rows : int
        Data rows of the file.
    missing, non_numeric, non_finite : int
        Rows whose cell is empty/NULL, not a number, NaN or ±inf.
    malformed : int
        CSV lines that could not be parsed (e.g. a wrong number of fields).
    bad_rows : list of (row, text, problem)
        The first ``limit`` bad rows: 1-based data row (the header is row 0), the cell's
        raw text (the whole line for a malformed one), and what is wrong with it. Rows are
        counted as read: after a malformed line, the numbers of the well-formed rows are
        one lower than their line in the file, so fix malformed lines first.
    read_error : str or None
        DuckDB's own message when the file cannot be parsed at all (it names the line).
    """

    path: str
    column: str
    rows: int = 0
    missing: int = 0
    non_numeric: int = 0
    non_finite: int = 0
    malformed: int = 0
    bad_rows: list[tuple[int, str, str]] = field(default_factory=list)
    read_error: str | None = None

    @property
    def clean(self) -> bool:
        """Whether every row holds a finite number."""
        return self.read_error is None and not (self.missing or self.non_numeric
                                                or self.non_finite or self.malformed)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (with ``"release": False``)."""
        return {
            "release": False,
            "note": "NOT a private release: raw rows of the data, for the data owner only",
            "path": self.path, "column": self.column, "rows": self.rows,
            "missing": self.missing, "non_numeric": self.non_numeric,
            "non_finite": self.non_finite, "malformed": self.malformed,
            "bad_rows": [{"row": r, "text": t, "problem": p} for r, t, p in self.bad_rows],
            "read_error": self.read_error, "clean": self.clean,
        }


def inspect_column(
    path: str | os.PathLike[str], column: str, *, limit: int = 20
) -> ColumnInspection:
    """List the bad rows of ``column`` (module docstring: not a private release).

    Parameters
    ----------
    path : str or path-like
        CSV or Parquet file.
    column : str
        Column name.
    limit : int, default=20
        At most this many bad rows are listed (the counts cover every row).

    Returns
    -------
    ColumnInspection
    """
    import duckdb

    from dpfair.data._io import check_path, list_columns

    p = check_path(path)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidParameterError(f"limit={limit!r}: expected an int >= 0.")
    try:
        fmt = sql.sniff(p)
    except Exception as exc:  # a workbook, a PDF, ...: say what it is
        return ColumnInspection(str(p), column, read_error=str(exc))
    try:
        names = list(list_columns(p))
    except Exception:  # the layout cannot be read: show DuckDB's own words below
        names = [column]
    if column not in names:
        raise InvalidParameterError(
            f"column='{column}': not found in '{p.name}'. Available columns: "
            f"{', '.join(repr(n) for n in names)}."
        )
    q = sql.quote(column)
    if fmt == "parquet":
        source = sql.scan(p, "parquet", file_row_number=True)
        rows_sql = f"SELECT file_row_number + 1 AS r, CAST({q} AS VARCHAR) AS v FROM {source}"
    else:
        source = sql.scan(p, "csv", all_varchar=True, store_rejects=True)
        rows_sql = f"SELECT row_number() OVER () AS r, {q} AS v FROM {source}"
    kind = (
        "CASE WHEN v IS NULL OR trim(v) = '' THEN 'missing' "
        "WHEN TRY_CAST(v AS DOUBLE) IS NULL THEN 'not a number' "
        "WHEN isnan(TRY_CAST(v AS DOUBLE)) OR isinf(TRY_CAST(v AS DOUBLE)) "
        "THEN 'NaN or infinite' ELSE NULL END"
    )
    query = f"WITH t AS ({rows_sql}), k AS (SELECT r, v, {kind} AS problem FROM t)"
    try:
        with sql.connect() as con:
            con.execute("SET threads = 1")  # row_number() in file order
            counts = con.execute(
                f"{query} SELECT count(*), count(*) FILTER (problem = 'missing'), "
                "count(*) FILTER (problem = 'not a number'), "
                "count(*) FILTER (problem = 'NaN or infinite') FROM k"
            ).fetchone() or (0, 0, 0, 0)
            bad = con.execute(
                f"{query} SELECT r, coalesce(v, ''), problem FROM k WHERE problem IS NOT NULL "
                f"ORDER BY r LIMIT {int(limit)}"
            ).fetchall()
            rejects: list[tuple[int, str, str]] = []
            n_rejects = 0
            if fmt == "csv":
                n_rejects = int((con.execute("SELECT count(*) FROM reject_errors")
                                 .fetchone() or (0,))[0])
                rejects = [
                    (int(line) - 1, str(text), f"malformed line ({str(kind).lower()})")
                    for line, kind, text in con.execute(
                        "SELECT line, error_type, csv_line FROM reject_errors ORDER BY line "
                        f"LIMIT {int(limit)}"
                    ).fetchall()
                ]
    except duckdb.Error as exc:
        return ColumnInspection(str(p), column, read_error=" ".join(str(exc).split())[:500])
    return ColumnInspection(
        str(p), column, rows=int(counts[0]), missing=int(counts[1]),
        non_numeric=int(counts[2]), non_finite=int(counts[3]), malformed=n_rejects,
        bad_rows=sorted(rejects + [(int(r), str(v), str(k)) for r, v, k in bad])[:limit],
    )


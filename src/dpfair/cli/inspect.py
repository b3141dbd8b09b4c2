"""``dpfair inspect DATA --column C``: the data owner's look at bad rows, NOT a release.

Every data command withholds the details of a failure on the data (it names the column and
the kind of problem, never a value, a row number or a count, and charges the failure). The
person who holds the file needs those details to clean it: this command prints them, in the
clear, and says so. It uses no ledger and spends no budget, because it is not a private
release; its output must not reach anyone the budget protects the data from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpfair.cli._support import emit, user_errors

__all__ = ["register"]

NOT_A_RELEASE = (
    "NOT A PRIVATE RELEASE: raw rows, values and counts of DATA, for the data owner only. "
    "No budget is spent and no guarantee applies."
)


def inspect(
    data: Annotated[
        Path, typer.Argument(metavar="DATA", help="CSV or Parquet file.", show_default=False)
    ],
    column: Annotated[str, typer.Option("--column", "-c", help="Column to check.")],
    limit: Annotated[
        int, typer.Option("--limit", min=0, help="List at most this many bad rows.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """The data owner's look at the bad rows of one column: NOT a private release.

    Lists the rows a release would refuse (missing cells, entries that are not numbers,
    NaN, infinities, malformed lines) with their data-row number (the header is row 0) and
    raw text, and the counts. This reads and prints the data in the clear; it spends no
    budget because it is not a release. Clean the file, then run the private command again.
    """
    from dpfair.data.bad_rows import inspect_column

    with user_errors():
        found = inspect_column(data, column, limit=limit)
    typer.echo(f"dpfair: {NOT_A_RELEASE}", err=True)
    rows = [("note", NOT_A_RELEASE), ("data", f"{found.path} [{found.column}]")]
    if found.read_error is not None:
        rows.append(("cannot be read", found.read_error))
    else:
        rows += [
            ("rows", str(found.rows)),
            ("missing", str(found.missing)),
            ("not a number", str(found.non_numeric)),
            ("NaN or infinite", str(found.non_finite)),
            ("malformed lines", str(found.malformed)),
        ]
        rows += [(f"row {r}", f"{text!r}: {problem}") for r, text, problem in found.bad_rows]
        if found.clean:
            rows.append(("result", "every row holds a finite number"))
    emit(found.to_dict(), as_json=as_json, title="dpfair inspect (NOT a private release)",
         rows=rows)


def register(app: typer.Typer) -> None:
    """Add ``inspect`` to the ``dpfair`` Typer app."""
    app.command("inspect")(inspect)

"""Helpers shared by every ``dpfair`` sub-command: error exit, JSON encoding, the printer.

Each module of :mod:`dpfair.cli` maps flags onto the public API and uses these, so every command
fails the same way (one line on stderr, exit code 2, no traceback) and prints the same way
(a two-column table on a terminal, JSON with ``--json``).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from dpfair._errors import DPFairError

__all__ = [
    "EXIT_USER_ERROR",
    "describe_os_error",
    "emit",
    "fail",
    "fmt",
    "json_default",
    "run_with_progress",
    "user_errors",
]

T = TypeVar("T")
ProgressCallback = Callable[[int, int, str], None]

EXIT_USER_ERROR = 2


def fail(message: str) -> NoReturn:
    """Print ``dpfair: error: message`` on one line to stderr and exit with code 2."""
    one_line = " ".join(str(message).split())
    typer.echo(f"dpfair: error: {one_line}", err=True)
    raise typer.Exit(EXIT_USER_ERROR)


def describe_os_error(exc: OSError) -> str:
    """``'path': reason`` for a file error."""
    where = f"'{exc.filename}'" if exc.filename else "file"
    return f"{where}: {exc.strerror or exc}"


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn dpfair errors and file errors raised inside a command into exit code 2.

    A DuckDB error that escaped a reader (it should not: :mod:`dpfair.data.sql`
    translates them) also becomes one line, without DuckDB's text, which quotes the file.
    """
    try:
        yield
    except DPFairError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(describe_os_error(exc))
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "duckdb" and not any(
            c.__module__.split(".")[0] == "duckdb" for c in type(exc).__mro__
        ):
            raise
        from dpfair.data.sql import translate

        fail(str(translate(exc, "DATA")))


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback for numpy scalars/arrays, paths and result objects."""
    import numpy as np  # already loaded by whatever produced the value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def fmt(value: Any) -> str:
    """Short human-readable text for a table cell."""
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if value is None:
        return "-"
    return str(value)


def emit(
    payload: Mapping[str, Any],
    *,
    as_json: bool,
    title: str,
    rows: Sequence[tuple[str, str]] | None = None,
) -> None:
    """Print a command's result: JSON with ``--json``, else a two-column table.

    Parameters
    ----------
    payload : mapping
        The machine-readable result (printed as JSON, keys in insertion order).
    as_json : bool
        Print JSON instead of a table.
    title : str
        Table title.
    rows : sequence of (label, text), optional
        Human-readable rows; by default the top-level scalar entries of ``payload``.
    """
    if as_json:
        typer.echo(json.dumps(payload, indent=2, default=json_default, allow_nan=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if rows is None:
        rows = [(k, fmt(v)) for k, v in payload.items() if not isinstance(v, (dict, list))]
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    for label, text in rows:
        table.add_row(Text(label), Text(text))  # Text: no markup parsing of values
    Console(soft_wrap=False).print(table)


def run_with_progress(work: Callable[[ProgressCallback | None], T], label: str = "work") -> T:
    """Run ``work(progress)`` with a rich progress bar on a terminal, quietly when piped.

    ``progress(done, total, label)`` updates the bar; ``work`` receives ``None`` when
    stderr is not a terminal.
    """
    if not sys.stderr.isatty():
        return work(None)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def progress(done: int, total: int, text: str) -> None:
            bar.update(task, completed=done, total=total, description=text)

        return work(progress)

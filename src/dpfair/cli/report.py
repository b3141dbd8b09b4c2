"""``dpfair report``: the HTML report (simulated and bundled public data only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpfair.cli._support import run_with_progress, user_errors

__all__ = ["register"]


def report(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory (created if missing).")
    ] = Path("out/report"),
    quick: Annotated[
        bool,
        typer.Option("--quick", help="Small repetition counts and sizes: well under a minute "
                     "on 2 cores."),
    ] = False,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of every simulation.")] = 0,
) -> None:
    """Build the HTML report: median CIs, facility location and fair classification.

    Writes a self-contained index.html (figures embedded) and results.json into OUT, both
    atomically (results first), and prints the path of the HTML file. Every number comes
    from simulated or bundled public data.
    """
    from dpfair.report import build_report  # matplotlib is only imported when needed

    with user_errors():
        path = run_with_progress(
            lambda progress: build_report(out, quick=quick, seed=seed, progress=progress)
        )
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add ``report`` to the ``dpfair`` Typer app."""
    app.command("report")(report)

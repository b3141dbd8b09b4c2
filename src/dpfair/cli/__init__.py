"""The ``dpfair`` command line: one module per command group, each a thin layer.

No statistics live here. Each command maps its flags onto :class:`dpfair.Session` (every
command that touches private data: validate, pre-check, charge, compute, in that order,
with one withheld error text) or the public API, and hands the result to one shared
printer (a table on a terminal, JSON with ``--json``). User errors
(:class:`dpfair.DPFairError`, file errors, bad flags) become one line on stderr and exit
code 2, without a traceback.

Modules: :mod:`.median` (``median-ci``), :mod:`.facility`, :mod:`.fairclass`
(``fair-classify``), :mod:`.fdp`, :mod:`.inspect`, :mod:`.datasets`, :mod:`.reproduce`,
:mod:`.report`; ``ledger`` is :mod:`.ledger`. The group imports a command's
module only when that command runs (:mod:`._lazy`), so ``dpfair --help`` loads no numpy and
each data command only what it uses.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, ClassVar

import typer

import dpfair
from dpfair._errors import DPFairError
from dpfair.cli._lazy import LazyGroup
from dpfair.cli._support import EXIT_USER_ERROR, describe_os_error

__all__ = ["app", "main"]


class _Commands(LazyGroup):
    """The commands of other packages, imported when first used (``dpfair --help`` and
    ``--version`` import none of them). One-line help = the command's docstring's first
    line (tests/cli/test_fast_cli.py checks it)."""

    lazy_commands: ClassVar[Mapping[str, tuple[str, str]]] = {
        "median-ci": (
            "dpfair.cli.median",
            "Private confidence interval for the median of one column.",
        ),
        "quantile-ci": (
            "dpfair.cli.quantile",
            "Private confidence intervals for quantiles of one column (simultaneous coverage).",
        ),
        "inspect": (
            "dpfair.cli.inspect",
            "The data owner's look at the bad rows of one column: NOT a private release.",
        ),
        "report": (
            "dpfair.cli.report",
            "Build the HTML report: median CIs, facility location and fair classification.",
        ),
        "reproduce": (
            "dpfair.cli.reproduce",
            "Run a registered study in parallel, resumably, and print its per-cell summary.",
        ),
        "facility": (
            "dpfair.cli.facility",
            "Place a facility privately on [LO, HI] from the locations in one column.",
        ),
        "fair-classify": (
            "dpfair.cli.fairclass",
            "Fit CDP-Fair on TRAIN ((ε, δ)-DP) and report test error, |DD| and the privacy "
            "spent.",
        ),
        "fdp": (
            "dpfair.cli.fdp",
            "FDP-Fair: federated DP fair classification (paper 003).",
        ),
        "ledger": (
            "dpfair.cli.ledger",
            "A persistent privacy ledger: one total budget for every release on one data file.",
        ),
        "datasets": (
            "dpfair.cli.datasets",
            "Write example data files: a public data set split in two, or simulated sites.",
        ),
    }


app = typer.Typer(
    cls=_Commands,
    name="dpfair",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals could hold private data
    rich_markup_mode="markdown",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"dpfair {dpfair.__version__}")
        raise typer.Exit()


# --------------------------------------------------------------------------- commands
@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Print the dpfair version and exit.",
        ),
    ] = False,
) -> None:
    """Differentially private statistics you can account for.

    Every command that touches data prints only differentially private output and states
    the privacy it spent, under replace-one neighbours, in its mechanism's own measure:
    **median-ci** ρ-zCDP (with the implied (ε, δ)-DP); **facility** pure ε-DP;
    **fair-classify** and **fdp** (ε, δ)-DP. **report**, **reproduce** (every study of the
    three papers) and **datasets** run on public or simulated data. **inspect** is the
    data owner's non-private look at bad rows.
    """


# --------------------------------------------------------------------------- entry point
def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point (``dpfair``).

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Notes
    -----
    Exits with 0 on success, 2 on a user error (bad flag, bad data, missing file: one line
    on stderr, no traceback) and 1 on an unexpected internal error.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="dpfair")
    except DPFairError as exc:  # raised outside a command body (e.g. while parsing)
        typer.echo(f"dpfair: error: {' '.join(str(exc).split())}", err=True)
        sys.exit(EXIT_USER_ERROR)
    except OSError as exc:
        typer.echo(f"dpfair: error: {describe_os_error(exc)}", err=True)
        sys.exit(EXIT_USER_ERROR)



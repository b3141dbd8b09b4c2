"""The ``dpfair`` command line: parse flags, call one public function, print.

No statistics live here. Each command maps its flags onto the public API and hands the
result to one shared printer (a table on a terminal, JSON with ``--json``). User errors
(:class:`dpfair.DPFairError` and file errors) become a one-line message on stderr and exit
code 2, without a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

import typer

import dpfair
from dpfair._cli_lazy import LazyGroup
from dpfair._cli_ledger import LedgerOption, open_ledger
from dpfair._cli_support import (
    EXIT_USER_ERROR,
    describe_os_error,
    emit,
    fmt,
    run_with_progress,
    user_errors,
)
from dpfair._errors import DPFairError

__all__ = ["app", "main"]

_REPORT_DELTA = 1e-6  # δ at which the table also shows the (ε, δ)-DP equivalent of ρ-zCDP


class _Commands(LazyGroup):
    """The commands of other packages, imported when first used (``dpfair --help`` and
    ``--version`` import none of them). One-line help = the command's docstring's first
    line (tests/cli/test_fast_cli.py checks it)."""

    lazy_commands: ClassVar[Mapping[str, tuple[str, str]]] = {
        "reproduce": (
            "dpfair.experiments.cli",
            "Run a registered study in parallel, resumably, and print its per-cell summary.",
        ),
        "facility": (
            "dpfair.facility.cli",
            "Place a facility privately on [LO, HI] from the locations in one column.",
        ),
        "fair-classify": (
            "dpfair.fairclass.cli",
            "Fit CDP-Fair on TRAIN ((ε, δ)-DP) and report test error, |DD| and the privacy "
            "spent.",
        ),
        "fdp": (
            "dpfair.fairclass.federated.cli",
            "FDP-Fair: federated DP fair classification (paper 003).",
        ),
        "ledger": (
            "dpfair.privacy.cli",
            "A persistent privacy ledger: one total budget for every release on one data file.",
        ),
        "datasets": (
            "dpfair.data.cli",
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
    three papers) and **datasets** run on public or simulated data.
    """


@app.command("median-ci")
def median_ci(
    data: Annotated[
        Path,
        typer.Argument(
            metavar="DATA", help="CSV (optionally .gz) or Parquet file.", show_default=False
        ),
    ],
    column: Annotated[str, typer.Option("--column", "-c", help="Numeric column to use.")],
    rho: Annotated[float, typer.Option("--rho", help="zCDP budget ρ > 0 to spend.")],
    bounds: Annotated[
        tuple[float, float],
        typer.Option(
            "--bounds",
            metavar="LO HI",
            help=(
                "Public range [LO, HI] promised to contain the median. It must come from "
                "outside knowledge, never from the data's min/max (that is itself a release)."
            ),
        ),
    ],
    alpha: Annotated[
        float, typer.Option("--alpha", help="Miscoverage α in (0, 1): coverage ≥ 1 − α.")
    ] = 0.05,
    method: Annotated[
        str,
        typer.Option("--method", "-m", help="expmech, cdf, binsearch or binsearch_cdf."),
    ] = "expmech",
    granularity: Annotated[
        float | None,
        typer.Option(
            "--granularity",
            help="Granularity θ > 0 (default: the method's default, a fraction of |HI − LO|).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            min=0,
            help="Seed for reproducible output (default: OS entropy; use that in deployments).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
    aggregate: Annotated[
        str,
        typer.Option(
            "--aggregate",
            help=(
                "auto | always | never. Aggregate the column to bin counts with DuckDB "
                "(out of core, O(bins) memory) instead of loading it; 'auto' does so for "
                "files over 2^24 rows (a public count). Identical results for the tree "
                "methods; ExpMech then runs on bin-rounded records (see the Python API: "
                "dpfair.median, counts-based interval)."
            ),
        ),
    ] = "auto",
    ledger: LedgerOption = None,
) -> None:
    """Private confidence interval for the median of one column.

    Spends exactly RHO (ρ-zCDP, replace-one neighbours) and prints only the private
    interval, its midpoint and the privacy spent; the non-private interval is never
    printed, because it would be a release of the raw order statistics.
    """
    with user_errors():
        if aggregate not in ("auto", "always", "never"):
            raise dpfair.InvalidParameterError(
                f"aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
            )
        led = open_ledger(ledger, data)
        led.precheck(dpfair.privacy.Budget.zcdp(rho), label="median_ci")
        # decided by the public row count, never by the file's size (dpfair.data._paths)
        if dpfair.data.use_out_of_core(data, aggregate):
            depth = dpfair.median.aggregation_depth(method, bounds, granularity)

            def refine(sub: tuple[float, float], d: int) -> Any:
                return dpfair.data.histogram_counts(data, column, sub, d)

            result = dpfair.median.confidence_interval_from_counts(
                dpfair.data.histogram_counts(data, column, bounds, depth),
                rho=rho,
                bounds=bounds,
                alpha=alpha,
                method=method,
                granularity=granularity,
                rng=seed,
                refine=refine,
            )
        else:
            x = dpfair.data.read_column(data, column)
            result = dpfair.median.confidence_interval(
                x,
                rho=rho,
                bounds=bounds,
                alpha=alpha,
                method=method,
                granularity=granularity,
                rng=seed,
            )
        charged = led.charge(result.privacy, label="median_ci", params={
            "column": column, "rho": rho, "bounds": list(bounds), "alpha": alpha,
            "method": method, "granularity": result.granularity, "n": result.n,
            "data": str(data), "seeded": seed is not None})
        payload: dict[str, Any] = result.to_dict()
        payload["input"] = {"path": str(data), "column": column}
        payload["seed"] = seed
        if charged:
            payload["ledger"] = charged
        privacy = result.privacy
        spent = str(privacy)
        if privacy.kind == "zcdp" and privacy.rho:
            eps = privacy.to_approx(_REPORT_DELTA).epsilon
            spent += f"  (implies ({eps:.3g}, {_REPORT_DELTA:g})-DP)"
        rows = [
            ("data", f"{data} [{column}]"),
            ("n", str(result.n)),
            ("method", result.method),
            (f"{1 - result.alpha:.3g} CI", f"[{fmt(result.low)}, {fmt(result.high)}]"),
            ("estimate", fmt(result.estimate)),
            ("public bounds", f"[{fmt(result.bounds[0])}, {fmt(result.bounds[1])}]"),
            ("granularity", fmt(result.granularity)),
            ("privacy spent", spent),
            ("seed", fmt(seed) if seed is not None else "none (OS entropy)"),
        ]
        rows += [r for r in [led.row(charged)] if r]
    emit(payload, as_json=as_json, title="Private median confidence interval", rows=rows)


@app.command("report")
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


if __name__ == "__main__":  # pragma: no cover
    main()

"""``dpfair median-ci``: a :class:`~dpfair.Session` release of the median's private CI.

The command parses flags, opens a session on DATA (its ``--ledger``, or a one-release cap
equal to ``--rho``) and calls :meth:`dpfair.Session.median_ci`: the same validation,
pre-check, charge and withheld error text as the Python API. It imports only the median
and the data readers (no scikit-learn, pandas or SciPy's optimiser).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dpfair._advice import warn_free
from dpfair.cli._ledger import (
    LedgerOption,
    SeedOption,
    ledger_row,
    ledger_summary,
    open_session,
    release_context,
)
from dpfair.cli._support import emit, fmt, user_errors

__all__ = ["register"]

_REPORT_DELTA = 1e-6  # δ at which the table also shows the (ε, δ)-DP equivalent of ρ-zCDP


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
    seed: SeedOption = None,
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
    from dpfair._validation import check_positive
    from dpfair.privacy import Budget

    with user_errors():
        request = Budget.zcdp(check_positive("rho", rho))
        session = open_session(data, ledger=ledger, request=request, seed=seed)
        with release_context(ledger):
            result = session.median_ci(
                column, rho=rho, bounds=bounds, alpha=alpha, method=method,
                granularity=granularity, aggregate=aggregate,
            )
            free = warn_free(result.privacy, low=result.low, high=result.high,
                             bounds=result.bounds, what="median")  # post-processing
        charged = ledger_summary(session, ledger)
        payload: dict[str, Any] = result.to_dict()
        payload["input"] = {"path": str(data), "column": column}
        payload["seed"] = seed
        payload["warnings"] = list(free)
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
            ("seed", f"{seed} (reproduction mode)" if seed is not None else "none (OS entropy)"),
            *ledger_row(charged),
        ]
    emit(payload, as_json=as_json, title="Private median confidence interval", rows=rows)


def register(app: typer.Typer) -> None:
    """Add ``median-ci`` to the ``dpfair`` Typer app."""
    app.command("median-ci")(median_ci)

"""``dpfair ledger init``, ``show`` and ``forget``: a persistent privacy ledger.

A ledger is an append-only journal (:class:`dpfair.privacy.LedgerFile`) with a total
budget, bound to one data file by its content (SHA-256) and registered as *the* ledger of
that content in the user's state directory (one ledger per data set; ``docs/ledgers.md``).
Every data command given ``--ledger FILE`` charges it before printing or writing anything
(through a :class:`dpfair.Session`). ``forget`` is the deliberate reset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dpfair._errors import InvalidParameterError
from dpfair.cli._support import emit, fmt, json_default, user_errors

__all__ = ["ledger_app", "register"]

ledger_app = typer.Typer(
    name="ledger",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    help="A persistent privacy ledger: one total budget for every release on one data file.",
)


def _cap(rho: float | None, epsilon: float | None, delta: float | None) -> Any:
    from dpfair.privacy import Budget

    if rho is not None and (epsilon is not None or delta is not None):
        raise InvalidParameterError(
            "--rho and --epsilon/--delta: give one total budget, either --rho R (zCDP) or "
            "--epsilon E [--delta D] ((epsilon, delta)-DP; pure without --delta)."
        )
    if rho is not None:
        cap = Budget.zcdp(rho)
        main = cap.rho
    elif epsilon is not None:
        cap = Budget.pure(epsilon) if delta is None else Budget.approx(epsilon, delta)
        main = cap.epsilon
    else:
        raise InvalidParameterError(
            "budget: missing; pass --rho R (zCDP) or --epsilon E [--delta D]."
        )
    if not main or main <= 0:
        raise InvalidParameterError(f"budget={cap}: a total budget must be > 0.")
    return cap


@ledger_app.command("init")
def init(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The ledger file to create.",
                                         show_default=False)],
    data: Annotated[
        Path,
        typer.Option("--data", help="The data file (CSV or Parquet) the ledger is bound to.",
                     show_default=False),
    ],
    rho: Annotated[
        float | None,
        typer.Option("--rho", help="Total ρ-zCDP budget (for median-ci, facility).",
                     show_default=False),
    ] = None,
    epsilon: Annotated[
        float | None,
        typer.Option("--epsilon", help="Total ε ((ε, δ)-DP with --delta, else pure ε-DP).",
                     show_default=False),
    ] = None,
    delta: Annotated[
        float | None,
        typer.Option("--delta", help="Total δ in (0, 1) (with --epsilon).", show_default=False),
    ] = None,
    convert_delta: Annotated[
        float | None,
        typer.Option(
            "--convert-delta",
            metavar="D'",
            help=(
                "With an (ε, δ) budget: charge each ρ-zCDP release (median-ci) as "
                "(ε(ρ, D'), D') (Canonne-Kamath-Steinke). Without it such releases are "
                "refused."
            ),
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """Create a ledger FILE with a total budget, bound to the content of DATA.

    One data set has one ledger: refused when DATA's content (by SHA-256, under any name)
    already has one, which is named. Composition: ρ adds; a facility (pure ε,
    exponential mechanism) costs ε²/8 of a ρ budget; ε and δ add on an (ε, δ) budget; a
    zCDP release on an (ε, δ) budget needs
    --convert-delta; an (ε, δ) release (fair-classify) cannot be charged to a ρ budget.
    """
    from dpfair.privacy import LedgerFile

    with user_errors():
        cap = _cap(rho, epsilon, delta)
        led = LedgerFile.create(file, cap, data=data, convert_delta=convert_delta)
        summary = led.summary()
        rows = [
            ("ledger", str(led.path)),
            ("data", f"{summary['data']['path']} ({summary['data']['fingerprint'][:23]}…)"),
            ("budget", str(cap)),
            ("convert delta", fmt(convert_delta)),
        ]
    emit(summary, as_json=as_json, title="Privacy ledger created", rows=rows)


@ledger_app.command("show")
def show(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A ledger file.",
                                         show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """Print every release charged to the ledger FILE, what was spent and what remains."""
    from dpfair.privacy import LedgerFile

    with user_errors():
        led = LedgerFile.open(file)
        parsed = led.snapshot()
        summary = led.summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2, default=json_default, allow_nan=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    data = summary.get("data") or {}
    console = Console(soft_wrap=False)
    head = Table(title="Privacy ledger", show_header=False, title_justify="left")
    head.add_column("field", style="bold")
    head.add_column("value")
    for label, text in [
        ("ledger", str(led.path)),
        ("data", str(data.get("path", "-"))),
        ("budget", str(parsed.cap)),
        ("spent", str(parsed.spent)),
        ("remaining", str(parsed.remaining)),
        ("releases", str(len(parsed.records))),
    ]:
        head.add_row(Text(label), Text(text))
    console.print(head)
    if not parsed.records:
        return
    table = Table(title="Releases", title_justify="left")
    for col in ("#", "time (UTC)", "release", "cost", "charged"):
        table.add_column(col, no_wrap=True)
    lines = []
    for rec in parsed.records:
        table.add_row(
            Text(str(rec.seq)),
            Text(rec.time[:19].replace("T", " ")),
            Text(rec.label),
            Text(str(rec.cost)),
            Text(str(rec.charged)),
        )
        shown = " ".join(
            f"{k}={json.dumps(v, default=str, separators=(',', ':'))}"
            for k, v in rec.params.items()
            if k not in ("via", "seeded", "data")
        )
        lines.append(Text(f"#{rec.seq} {rec.label}: {shown}"))
    console.print(table)
    console.print(Text("Parameters (public; every field with --json)", style="bold"))
    for line in lines:
        console.print(line)


@ledger_app.command("forget")
def forget(
    data: Annotated[Path, typer.Argument(metavar="DATA", help="The data file.",
                                         show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", help="Confirm the reset.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """Deliberately reset: forget DATA's registered ledger (and its high-water mark).

    Afterwards a new ledger can be created for DATA's content, and the old ledger file is
    no longer protected against being rolled back. The budget already spent on DATA is
    then no longer enforced: do this only when the data set is retired or its owners agree
    to a new budget. The ledger file itself is not touched.
    """
    from dpfair.privacy import forget_data

    with user_errors():
        if not yes:
            raise InvalidParameterError(
                f"forget {data}: this stops enforcing the budget already spent on these data; "
                "pass --yes to do it deliberately."
            )
        entry = forget_data(data)
        if entry is None:
            raise InvalidParameterError(
                f"data={data}: no ledger is registered for its content; nothing to forget."
            )
        summary = {"forgotten": entry}
        rows = [("data", str(data)), ("ledger forgotten", str(entry["path"])),
                ("ledger id", str(entry["ledger_id"]))]
    emit(summary, as_json=as_json, title="Registry entry removed", rows=rows)


def register(app: typer.Typer) -> None:
    """Add the ``ledger`` command group to the ``dpfair`` Typer app."""
    app.add_typer(ledger_app, name="ledger")

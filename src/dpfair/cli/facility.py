"""``dpfair facility``: a :class:`~dpfair.Session` release of one private location.

:func:`register` adds it to the main ``dpfair`` app. The command parses flags, opens a
session on DATA (its ``--ledger``, or a one-release cap of ε) and calls
:meth:`dpfair.Session.place_facility` (DPExpMed, paper 000); the facility studies run
through ``dpfair reproduce facility-…``. User errors become one line on stderr and exit
code 2.
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

_LEVEL = 0.95  # quantile level reported with --report-metrics


def facility(
    data: Annotated[
        Path,
        typer.Argument(metavar="DATA", help="CSV (optionally .gz) or Parquet file.",
                       show_default=False),
    ],
    column: Annotated[str, typer.Option("--column", "-c", help="Numeric column of locations.")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Privacy budget ε > 0 (pure DP).")],
    domain: Annotated[
        tuple[float, float],
        typer.Option(
            "--domain",
            metavar="LO HI",
            help=(
                "Public domain [LO, HI] of the locations. It must come from outside "
                "knowledge, never from the data's min/max (that is itself a release); a "
                "location outside it is clamped to it (per record: the guarantee holds; a "
                "refusal naming such records would release them)."
            ),
        ),
    ],
    widening: Annotated[
        float | None,
        typer.Option(
            "--widening",
            help=(
                "Widening α ≥ 0 (default 1/(n·ε), Cor. 7.10, which treats n as public; if "
                "the number of agents is private, pass a fixed value; 0 = unwidened)."
            ),
            show_default=False,
        ),
    ] = None,
    seed: SeedOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
    report_metrics: Annotated[
        bool,
        typer.Option(
            "--report-metrics",
            help=(
                "Also print the exact expected FAIR and SWDIFF of the mechanism on this data "
                "(and their 0.95-quantiles). NOT private: for analysts who hold the data; "
                "refused with --ledger or on data that have a registered ledger (a budget "
                "is in force)."
            ),
        ),
    ] = False,
    ledger: LedgerOption = None,
) -> None:
    """Place a facility privately on [LO, HI] from the locations in one column.

    Releases one location drawn by DPExpMed_α (paper 000): pure ε-DP under replace-one
    neighbours. Prints the location and the privacy spent; ``--report-metrics`` adds the
    mechanism's exact expected welfare loss (SWDIFF) and worst individual loss (FAIR) on
    this data, which are functions of the private data and are not themselves private.
    """
    from dpfair.facility import DPExpMed

    with user_errors():
        mech = DPExpMed(epsilon, domain, widening=widening)  # validates the flags
        if report_metrics and ledger is not None:
            from dpfair._errors import InvalidParameterError

            raise InvalidParameterError(
                "--report-metrics with --ledger: the metrics are non-private functions of "
                "the data, which a budget in force forbids. Drop one of the two."
            )
        session = open_session(data, ledger=ledger, request=mech.privacy, seed=seed)
        with release_context(ledger):
            location = session.place_facility(column, epsilon=epsilon, domain=domain,
                                              widening=widening)
            warn_free(mech.privacy)  # free: a large epsilon leaves little privacy
        rec = session.last_record
        assert rec is not None
        n = int(rec.params["n"])
        alpha = float(rec.params["widening"])
        charged = ledger_summary(session, ledger)
        payload: dict[str, Any] = {
            "location": location,
            "n": n,
            "epsilon": mech.epsilon,
            "domain": list(mech.domain),
            "widening": alpha,
            "widening_rule": "1/(n*epsilon)" if widening is None else "given",
            "privacy": mech.privacy.to_dict(),
            "neighbours": "replace-one",
            "input": {"path": str(data), "column": column},
            "seed": seed,
        }
        rows = [
            ("data", f"{data} [{column}]"),
            ("n", str(n)),
            ("location", fmt(location)),
            ("public domain", f"[{fmt(mech.domain[0])}, {fmt(mech.domain[1])}]"),
            ("widening α", f"{fmt(alpha)} ({payload['widening_rule']})"),
            ("privacy spent", f"{mech.privacy} (pure, replace-one neighbours)"),
            ("seed", f"{seed} (reproduction mode)" if seed is not None else "none (OS entropy)"),
        ]
        if charged:
            payload["ledger"] = charged
            rows += ledger_row(charged)
        if report_metrics:  # non-private, for the data owner: no budget is in force here
            import numpy as np

            import dpfair.data

            x = np.clip(dpfair.data.read_column(data, column), *mech.domain)
            dist = mech.distribution(x)
            metrics = {
                "expected_fair": dist.expected_fair(),
                "expected_swdiff": dist.expected_swdiff(),
                "level": _LEVEL,
                "fair_quantile": float(dist.fair_quantile(_LEVEL)),
                "swdiff_quantile": float(dist.swdiff_quantile(_LEVEL)),
                "optimum": dist.optimum,
                "note": "computed from the data: not differentially private",
            }
            payload["metrics"] = metrics
            rows += [
                ("E[FAIR] (not private)", fmt(metrics["expected_fair"])),
                ("E[SWDIFF] (not private)", fmt(metrics["expected_swdiff"])),
                (f"FAIR {_LEVEL:g}-quantile", fmt(metrics["fair_quantile"])),
                (f"SWDIFF {_LEVEL:g}-quantile", fmt(metrics["swdiff_quantile"])),
            ]
    emit(payload, as_json=as_json, title="Private facility location (DPExpMed)", rows=rows)


def register(app: typer.Typer) -> None:
    """Add ``facility`` to the ``dpfair`` Typer app."""
    app.command("facility")(facility)

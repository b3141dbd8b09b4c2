"""``dpfair quantile-ci``: a :class:`~dpfair.Session` release of private quantile CIs.

The command parses flags, opens a session on DATA (its ``--ledger``, or a one-release cap
equal to ``--rho``) and calls :meth:`dpfair.Session.quantile_ci`: the same validation,
pre-check, charge and withheld error text as the Python API. Several ``--q`` levels get
SIMULTANEOUS coverage ≥ 1 − α (one release, charged once); ``--by G --groups ...`` gives
one family per public group under parallel composition (group sizes declared public).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

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


def _is_float(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _spread_values(args: list[str]) -> list[str]:
    """``--q 0.1 0.5 0.9`` → ``--q 0.1 --q 0.5 --q 0.9`` (and the same for ``--groups``).

    After ``--q`` every following number is a level; after ``--groups`` every following
    token up to the next option is a group (so DATA goes before ``--groups``, or after
    ``--``). Repeating the option (``--q 0.1 --q 0.5``) works too.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        out.append(tok)
        i += 1
        if tok == "--":
            out.extend(args[i:])
            break
        if tok in ("--q", "--groups") and i < len(args):
            out.append(args[i])
            i += 1
            while i < len(args) and (
                _is_float(args[i]) if tok == "--q" else not args[i].startswith("-")
            ):
                out += [tok, args[i]]
                i += 1
    return out


class _SpreadCommand(typer.core.TyperCommand):
    """The command, with several values after one ``--q`` / ``--groups`` accepted."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return list(super().parse_args(ctx, _spread_values(list(args))))


def _intervals(result: Any) -> list[Any]:
    return list(getattr(result, "intervals", (result,)))


def quantile_ci(
    data: Annotated[
        Path,
        typer.Argument(
            metavar="DATA", help="CSV (optionally .gz) or Parquet file.", show_default=False
        ),
    ],
    column: Annotated[str, typer.Option("--column", "-c", help="Numeric column to use.")],
    q: Annotated[
        list[float],
        typer.Option("--q", help="Quantile level(s) in (0, 1), e.g. --q 0.1 0.5 0.9."),
    ],
    rho: Annotated[float, typer.Option("--rho", help="zCDP budget ρ > 0 to spend.")],
    bounds: Annotated[
        tuple[float, float],
        typer.Option(
            "--bounds",
            metavar="LO HI",
            help=(
                "Public range [LO, HI] promised to contain the quantiles. It must come from "
                "outside knowledge, never from the data's min/max (that is itself a release)."
            ),
        ),
    ],
    alpha: Annotated[
        float,
        typer.Option("--alpha", help="Miscoverage α in (0, 1): simultaneous coverage ≥ 1 − α."),
    ] = 0.05,
    method: Annotated[
        str,
        typer.Option("--method", "-m", help="cdf, expmech, binsearch or binsearch_cdf."),
    ] = "cdf",
    by: Annotated[
        str | None,
        typer.Option("--by", help="Group column: one family of intervals per group."),
    ] = None,
    groups: Annotated[
        list[str] | None,
        typer.Option(
            "--groups",
            help=(
                "The PUBLIC list of groups to report (with --by; never read off the data). "
                "Their sizes are declared public (see Session.quantile_ci)."
            ),
        ),
    ] = None,
    seed: SeedOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
    ledger: LedgerOption = None,
) -> None:
    """Private confidence intervals for quantiles of one column (simultaneous coverage).

    Spends at most RHO (ρ-zCDP, replace-one neighbours, charged once for all levels and,
    with --by, once for all groups) and prints only the private intervals and the privacy
    spent; no non-private statistic is printed.
    """
    from dpfair._validation import check_positive
    from dpfair.privacy import Budget

    with user_errors():
        request = Budget.zcdp(check_positive("rho", rho))
        session = open_session(data, ledger=ledger, request=request, seed=seed)
        levels: Any = list(q) if len(q) > 1 else q[0]
        with release_context(ledger):
            result = session.quantile_ci(
                column, levels, rho=rho, bounds=bounds, alpha=alpha, method=method,
                by=by, groups=groups, group_sizes="public" if by is not None else None,
            )
        charged = ledger_summary(session, ledger)
        families = result if isinstance(result, dict) else {None: result}
        first = _intervals(next(iter(families.values())))[0]
        payload: dict[str, Any] = {
            "input": {"path": str(data), "column": column},
            "q": [float(v) for v in q], "alpha": alpha, "method": method,
            "simultaneous": len(q) > 1,
        }
        if by is None:
            payload["result"] = result.to_dict()
        else:
            payload["by"] = by
            payload["groups"] = {str(g): r.to_dict() for g, r in families.items()}
        record = session.last_record
        privacy = record.charged if record is not None else first.privacy
        payload["privacy"] = privacy.to_dict()
        payload["seed"] = seed
        # the free warnings (dpfair._advice, printed on stderr), as the median's JSON
        payload["warnings"] = [w for res in families.values() for iv in _intervals(res)
                               for w in iv.warnings]
        if charged:
            payload["ledger"] = charged
        spent = str(privacy)
        if privacy.kind == "zcdp" and privacy.rho:
            eps = privacy.to_approx(_REPORT_DELTA).epsilon
            spent += f"  (implies ({eps:.3g}, {_REPORT_DELTA:g})-DP)"
        level = f"{1 - alpha:.3g} CI"
        cover = (f"{1 - alpha:.3g}, simultaneous over {len(q)} levels" if len(q) > 1
                 else f"{1 - alpha:.3g}")
        rows: list[tuple[str, str]] = [("data", f"{data} [{column}]"), ("method", method),
                                       ("coverage", cover)]
        for g, res in families.items():
            ivs = _intervals(res)
            prefix = "" if g is None else f"{by}={g} "
            rows.append((f"{prefix}n", str(ivs[0].n)))
            rows += [(f"{prefix}q={iv.q:g} {level}", f"[{fmt(iv.low)}, {fmt(iv.high)}]")
                     for iv in ivs]
        rows += [
            ("public bounds", f"[{fmt(bounds[0])}, {fmt(bounds[1])}]"),
            ("privacy spent", spent),
            ("seed", f"{seed} (reproduction mode)" if seed is not None else "none (OS entropy)"),
            *ledger_row(charged),
        ]
    emit(payload, as_json=as_json, title="Private quantile confidence intervals", rows=rows)


def register(app: typer.Typer) -> None:
    """Add ``quantile-ci`` to the ``dpfair`` Typer app."""
    app.command("quantile-ci", cls=_SpreadCommand)(quantile_ci)

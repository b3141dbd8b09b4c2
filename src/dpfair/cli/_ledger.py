"""``--ledger FILE``, ``--seed`` and the :class:`~dpfair.Session` behind every data command.

Each data command does::

    s = open_session(data, ledger=ledger, request=cost, seed=seed)  # validated, bound
    with release_context(ledger):
        result = s.median_ci(...)      # pre-check, compute, charge: the Session's one road
    ... print / write ...

so a release is charged (fsync'ed, with ``--ledger``) before any of it is printed or
written, a request past the cap exits with code 2 and one line on stderr naming the
remaining budget and the requested cost, and a failure on the data is charged and reported
without a value, a row number or a count. Without ``--ledger`` the session's cap is the
request itself (one release; nothing persists across runs), unless the data's content has
a registered ledger: the command is then refused, naming that ledger (one ledger per data
set, THREATS.md rule 11).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpfair._errors import BudgetExceededError, IncompatibleBudgetError, LedgerError

if TYPE_CHECKING:  # imported where used: `dpfair --help` must not load dpfair.privacy
    from dpfair.privacy import Budget
    from dpfair.session import Session

__all__ = [
    "SEED_WARNING",
    "LedgerOption",
    "SeedOption",
    "ledger_row",
    "ledger_summary",
    "open_session",
    "release_context",
]

LedgerOption = Annotated[
    Path | None,
    typer.Option(
        "--ledger",
        metavar="FILE",
        help=(
            "Charge this release to a persistent privacy ledger (created by `dpfair ledger "
            "init`, bound to this data file) before anything is printed or written; refused "
            "with exit code 2 when it would pass the ledger's cap."
        ),
        show_default=False,
    ),
]

SeedOption = Annotated[
    int | None,
    typer.Option(
        "--seed",
        min=0,
        help=(
            "Tests and studies only: open the session for reproduction (the noise is a "
            "function of the seed; warned on every release, recorded in the ledger). "
            "Default and for real data: fresh OS entropy."
        ),
        show_default=False,
    ),
]

SEED_WARNING = (
    "dpfair: warning: --seed makes this release's noise reproducible by anyone who knows "
    "the seed. Use it for tests and studies only, never on real data."
)


def open_session(
    data: Path, *, ledger: Path | None, request: Budget, seed: int | None
) -> Session:
    """The session of one command run on ``data``.

    With ``ledger``: the ledger file (it must exist and be bound to ``data``'s content).
    Without: refused if ``data``'s content has a registered ledger (the message names it);
    else an in-memory ledger whose cap is ``request``, the one release of this run.
    ``seed`` opens it for reproduction (each release warns, see :func:`release_context`).

    Raises
    ------
    LedgerError
        Not a ledger, corrupt, truncated, bound to another data set, or bound to none; or
        no ``ledger`` for data that have a registered one.
    """
    from dpfair.session import Session

    if ledger is None:
        from dpfair.privacy import LedgerFile

        registered = LedgerFile.registered(data) if data.is_file() else None
        if registered is not None:
            # one ledger per data set (THREATS.md rule 11): never a fresh one-release cap
            raise LedgerError(
                f"data {data}: these data have the registered ledger {registered.path}; "
                f"every release on them is charged to it. Pass --ledger {registered.path}."
            )
        session = Session(data, budget=request, reproducible_seed=seed)
        session._via = "cli"
        return session
    from dpfair.privacy import LedgerFile

    led = LedgerFile.open(ledger)
    if led.header.get("data") is None:
        raise LedgerError(
            f"ledger={ledger} is not bound to a data file (it was created without one, e.g. "
            "by a Session on in-memory data), so it cannot show that DATA is its data set; "
            "create one with `dpfair ledger init FILE --data DATA`."
        )
    session = Session(data, ledger=led, reproducible_seed=seed)
    session._via = "cli"  # recorded in the entry's params
    return session


@contextmanager
def release_context(ledger: Path | None) -> Iterator[None]:
    """Around a session release: prefix a budget refusal with ``ledger=FILE:`` (it names
    the remaining budget) and print the session's warnings as one line each on stderr
    (the reproduction-mode warning, an uncertified fit, the free warnings of
    :mod:`dpfair._advice`)."""
    from dpfair._warnings import FreeWarning, UncertifiedFairnessWarning
    from dpfair.session import ReproducibleSeedWarning

    others: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", ReproducibleSeedWarning)
            warnings.simplefilter("always", UncertifiedFairnessWarning)
            warnings.simplefilter("always", FreeWarning)
            try:
                yield
            except (BudgetExceededError, IncompatibleBudgetError) as exc:
                if ledger is None:
                    raise
                raise type(exc)(f"ledger={ledger}: {exc}") from None
            finally:
                for w in seen:
                    if issubclass(w.category, ReproducibleSeedWarning):
                        typer.echo(SEED_WARNING, err=True)
                    elif issubclass(w.category, UncertifiedFairnessWarning):
                        typer.echo(f"warning: {' '.join(str(w.message).split())}", err=True)
                    elif issubclass(w.category, FreeWarning):  # dpfair._advice: one line each
                        typer.echo(f"dpfair: warning: {' '.join(str(w.message).split())}",
                                   err=True)
                    else:
                        others.append(w)
    finally:
        # re-issued only after recording stops: re-issuing inside the recording context
        # appended each warning to the list being read, an endless loop (issue 22).
        for w in others:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def ledger_summary(session: Session, ledger: Path | None) -> dict[str, Any] | None:
    """The last release's entry for the output (``None`` without ``--ledger``)."""
    if ledger is None:
        return None
    rec = session.last_record
    assert rec is not None
    return {
        "path": str(ledger),
        "entry": rec.seq,
        "charged": rec.charged.to_dict(),
        "remaining": session.remaining.to_dict(),
        "cap": session.budget.to_dict(),
    }


def ledger_row(summary: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """A table row ``("ledger", "FILE entry k: charged …; remaining … of …")`` or none."""
    if summary is None:
        return []
    from dpfair.privacy import budget_from_dict

    charged = budget_from_dict(summary["charged"])
    remaining = budget_from_dict(summary["remaining"])
    cap = budget_from_dict(summary["cap"])
    return [(
        "ledger",
        f"{summary['path']} entry {summary['entry']}: charged {charged}; "
        f"remaining {remaining} of {cap}",
    )]

"""``--ledger FILE`` for every ``dpfair`` command that touches data.

Each data command does, in this order::

    led = open_ledger(ledger, data)        # a valid ledger bound to this data file's content
    led.precheck(planned_cost, label=...)  # refused here: nothing computed, nothing charged
    ... compute the release ...
    led.charge(spent, label=..., params=...)  # under the file lock; refused: nothing shown
    ... print / write ...

so a release is charged (fsync'ed) before any of it is printed or written, and a request
past the cap exits with code 2 and one line on stderr naming the remaining budget and the
requested cost. The composition rules are :func:`dpfair.privacy.cost_in_measure`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpfair._errors import BudgetExceededError, IncompatibleBudgetError, LedgerError

if TYPE_CHECKING:  # imported where used: `dpfair --help` must not load dpfair.privacy
    from dpfair.privacy import Budget, LedgerFile

__all__ = ["LedgerOption", "ReleaseLedger", "open_ledger"]

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


@dataclass
class ReleaseLedger:
    """The ledger of one command run (``file`` is None without ``--ledger``)."""

    file: LedgerFile | None

    def _where(self) -> str:
        assert self.file is not None
        return f"ledger={self.file.path}"

    def precheck(self, cost: Budget, *, label: str, bounded_range: bool = False) -> None:
        """Raise (one line, exit 2 under ``user_errors``) if ``cost`` cannot be charged now."""
        if self.file is None:
            return
        try:
            self.file.check(cost, label=label, bounded_range=bounded_range)
        except (BudgetExceededError, IncompatibleBudgetError) as exc:
            raise type(exc)(f"{self._where()}: {exc}") from None

    def charge(
        self,
        cost: Budget,
        *,
        label: str,
        params: Mapping[str, Any],
        bounded_range: bool = False,
    ) -> dict[str, Any] | None:
        """Charge ``cost`` (on disk when this returns); a summary for the output, or None."""
        if self.file is None:
            return None
        try:
            rec = self.file.charge(
                cost, label=label, params={**params, "via": "cli"}, bounded_range=bounded_range
            )
        except (BudgetExceededError, IncompatibleBudgetError) as exc:
            raise type(exc)(f"{self._where()}: {exc}") from None
        return {
            "path": str(self.file.path),
            "entry": rec.seq,
            "charged": rec.charged.to_dict(),
            "remaining": self.file.remaining.to_dict(),
            "cap": self.file.cap.to_dict(),
        }

    def row(self, summary: Mapping[str, Any] | None) -> tuple[str, str] | None:
        """A table row ``("ledger", "entry k: charged …; remaining … of …")``."""
        if summary is None or self.file is None:
            return None
        from dpfair.privacy import budget_from_dict

        charged = budget_from_dict(summary["charged"])
        remaining = budget_from_dict(summary["remaining"])
        cap = budget_from_dict(summary["cap"])
        return (
            "ledger",
            f"{summary['path']} entry {summary['entry']}: charged {charged}; "
            f"remaining {remaining} of {cap}",
        )


def open_ledger(ledger: Path | None, data: Path) -> ReleaseLedger:
    """Open ``ledger`` (if given) and refuse it unless it is bound to ``data``'s content.

    Raises
    ------
    LedgerError
        Not a ledger, corrupt, truncated, bound to another data set, or bound to none.
    """
    if ledger is None:
        return ReleaseLedger(None)
    from dpfair.privacy import LedgerFile

    led = LedgerFile.open(ledger)
    if led.header.get("data") is None:
        raise LedgerError(
            f"ledger={ledger} is not bound to a data file (it was created without one, e.g. "
            "by a Session on in-memory data), so it cannot show that DATA is its data set; "
            "create one with `dpfair ledger init FILE --data DATA`."
        )
    led.check_data(data)
    return ReleaseLedger(led)

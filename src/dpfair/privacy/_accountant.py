"""A privacy filter: an accountant that refuses any release past its budget."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpfair._errors import BudgetExceededError, InvalidParameterError
from dpfair.privacy._budget import Budget

__all__ = ["Accountant", "LedgerEntry"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One charged release: its label and its budget."""

    label: str
    budget: Budget


@dataclass
class Accountant:
    """Adaptive privacy filter with a hard limit.

    ``charge`` is called *before* each release with that release's guarantee; if the
    composed total would exceed ``limit`` it raises :class:`BudgetExceededError` and records
    nothing, so a caller that catches the error has released nothing. Composition is basic
    (ε, δ add) for pure/approximate limits and additive ρ for zCDP limits, which is valid
    under full adaptivity for zCDP filters (Whitehouse et al. 2023) and for pure/approx
    DP with pre-set per-release budgets (Rogers et al. 2016).

    Examples
    --------
    >>> acct = Accountant(Budget.zcdp(0.5))
    >>> acct.charge(Budget.zcdp(0.25), label="median/lower")
    >>> acct.remaining
    Budget(kind='zcdp', epsilon=None, delta=0.0, rho=0.25, note='')
    """

    limit: Budget
    ledger: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.limit, Budget):
            raise InvalidParameterError(f"limit={self.limit!r}: expected a dpfair Budget.")

    @property
    def spent(self) -> Budget:
        """Composed total of every charge so far (zero in the limit's unit if none)."""
        total = self._zero()
        for entry in self.ledger:
            total = total + entry.budget
        return total

    @property
    def remaining(self) -> Budget:
        """What can still be spent (in the limit's unit)."""
        spent = self.spent
        if self.limit.kind == "zcdp":
            assert self.limit.rho is not None and spent.rho is not None
            return Budget.zcdp(max(self.limit.rho - spent.rho, 0.0))
        assert self.limit.epsilon is not None and spent.epsilon is not None
        eps = max(self.limit.epsilon - spent.epsilon, 0.0)
        if self.limit.kind == "pure":
            return Budget.pure(eps)
        return Budget.approx(eps, max(self.limit.delta - spent.delta, 0.0))

    def can_charge(self, budget: Budget) -> bool:
        """Would ``charge(budget)`` succeed?"""
        try:
            return self.limit.covers(self.spent + budget)
        except InvalidParameterError:
            return False

    def charge(self, budget: Budget, *, label: str = "") -> None:
        """Record a release, or raise :class:`BudgetExceededError` if it does not fit."""
        if not isinstance(budget, Budget):
            raise InvalidParameterError(f"budget={budget!r}: expected a dpfair Budget.")
        if not self.can_charge(budget):
            raise BudgetExceededError(
                f"charging {budget} for {label or 'a release'} would exceed the limit "
                f"{self.limit} (already spent {self.spent}). Lower the per-release budget "
                "or raise the limit."
            )
        self.ledger.append(LedgerEntry(label, budget))

    def _zero(self) -> Budget:
        if self.limit.kind == "zcdp":
            return Budget.zcdp(0.0)
        if self.limit.kind == "pure":
            return Budget.pure(0.0)
        return Budget.approx(0.0, 0.0)

"""Privacy budgets (pure, approximate, zCDP), conversions, composition and a filter."""

from dpfair.privacy._accountant import Accountant, LedgerEntry
from dpfair.privacy._budget import (
    Budget,
    BudgetKind,
    exponential_mechanism_zcdp,
    zcdp_to_approx_epsilon,
)

__all__ = [
    "Accountant",
    "Budget",
    "BudgetKind",
    "LedgerEntry",
    "exponential_mechanism_zcdp",
    "zcdp_to_approx_epsilon",
]

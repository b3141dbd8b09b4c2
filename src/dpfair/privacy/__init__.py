"""Privacy budgets (pure, approximate, zCDP), conversions, composition, filters, ledgers."""

from dpfair._errors import (
    BudgetExceededError,
    IncompatibleBudgetError,
    LedgerError,
    ReleaseReplayError,
)
from dpfair.privacy._accountant import Accountant, LedgerEntry
from dpfair.privacy._budget import (
    Budget,
    BudgetKind,
    exponential_mechanism_zcdp,
    zcdp_to_approx_epsilon,
)
from dpfair.privacy._compose import cost_in_measure
from dpfair.privacy._journal import LedgerFile, fingerprint_file
from dpfair.privacy._ledger import Ledger, LedgerRecord, budget_from_dict

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "BudgetKind",
    "IncompatibleBudgetError",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerFile",
    "LedgerRecord",
    "ReleaseReplayError",
    "budget_from_dict",
    "cost_in_measure",
    "exponential_mechanism_zcdp",
    "fingerprint_file",
    "zcdp_to_approx_epsilon",
]

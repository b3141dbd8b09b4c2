"""The privacy engine: budgets in four measures, conversions, composition, ledgers.

* :class:`Budget` — pure ε-DP, (ε, δ)-DP, ρ-zCDP or μ-GDP, with the conversions between
  them (:func:`zcdp_to_approx_epsilon`, :func:`gdp_epsilon`, :func:`gdp_delta`,
  :func:`exponential_mechanism_zcdp`);
* :func:`cost_in_measure` — the one table that charges a release in a cap's measure;
* :class:`Ledger` — the only accountant (in memory): sequential composition within a row
  set, parallel composition across disjoint row sets, single-use keys, a hard cap;
  ``Accountant`` is another name for it;
* :class:`LedgerFile` — its one persistent form: an append-only, hash-chained journal bound
  to one data set, safe across processes and crashes, checked against a high-water mark and
  a data registry in the user's state directory (``docs/ledgers.md``).

Importing this package loads neither NumPy nor SciPy (conversions import SciPy when
called).
"""

from dpfair._errors import (
    BudgetExceededError,
    IncompatibleBudgetError,
    LedgerError,
    ReleaseReplayError,
)
from dpfair.privacy._budget import (
    Budget,
    BudgetKind,
    exponential_mechanism_zcdp,
    gdp_delta,
    gdp_epsilon,
    zcdp_to_approx_epsilon,
)
from dpfair.privacy._compose import cost_in_measure
from dpfair.privacy._journal import LedgerFile, fingerprint_file, forget_data
from dpfair.privacy._ledger import Ledger, LedgerRecord, budget_from_dict
from dpfair.privacy._state import state_dir

#: The former name of :class:`Ledger` (a privacy filter: ``charge`` raises
#: :class:`BudgetExceededError` before any release past the cap).
Accountant = Ledger

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "BudgetKind",
    "IncompatibleBudgetError",
    "Ledger",
    "LedgerError",
    "LedgerFile",
    "LedgerRecord",
    "ReleaseReplayError",
    "budget_from_dict",
    "cost_in_measure",
    "exponential_mechanism_zcdp",
    "fingerprint_file",
    "forget_data",
    "gdp_delta",
    "gdp_epsilon",
    "state_dir",
    "zcdp_to_approx_epsilon",
]

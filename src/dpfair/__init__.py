"""dpfair: private and accountable decisions.

Subpackages: :mod:`dpfair.privacy` (budgets, accountant), :mod:`dpfair.mechanisms`
(Gaussian, exponential, noisy tree), :mod:`dpfair.median` (paper 004: confidence intervals
for the median under zCDP), :mod:`dpfair.facility` (paper 000: private facility location
with welfare and fairness guarantees), :mod:`dpfair.fairclass` (paper 003: classification
under a demographic-disparity cap with DP), :mod:`dpfair.data` (readers, synthetic designs,
bundled data), :mod:`dpfair.experiments` (reproducible studies), :class:`dpfair.Session`
(one privacy budget across many releases on one data set).

The subpackages (and ``Session``) are imported on first use (``dpfair.median`` loads
:mod:`dpfair.median`), so ``import dpfair`` and ``dpfair --version`` stay fast and load
neither SciPy, scikit-learn, DuckDB nor matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpfair._errors import (
    BudgetExceededError,
    DPFairError,
    IncompatibleBudgetError,
    InsufficientDataError,
    InvalidDataError,
    InvalidParameterError,
    LedgerError,
    MissingPublicBoundError,
    NotFittedError,
    ReleaseReplayError,
)
from dpfair._lazy import lazy_exports
from dpfair._warnings import DPFairWarning, UncertifiedFairnessWarning

if TYPE_CHECKING:
    from dpfair import (
        data,
        experiments,
        facility,
        fairclass,
        mechanisms,
        median,
        privacy,
        quantiles,
        report,
    )
    from dpfair.session import Session

__version__ = "0.1.0"

_SUBPACKAGES = frozenset(
    {"data", "experiments", "facility", "fairclass", "mechanisms", "median", "privacy",
     "quantiles", "report"}
)


# A subpackage (or Session) is imported on first access (PEP 562).
__getattr__, __dir__ = lazy_exports(__name__, {"Session": "dpfair.session"}, _SUBPACKAGES)

__all__ = [
    "BudgetExceededError",
    "DPFairError",
    "DPFairWarning",
    "IncompatibleBudgetError",
    "InsufficientDataError",
    "InvalidDataError",
    "InvalidParameterError",
    "LedgerError",
    "MissingPublicBoundError",
    "NotFittedError",
    "ReleaseReplayError",
    "Session",
    "UncertifiedFairnessWarning",
    "__version__",
    "data",
    "experiments",
    "facility",
    "fairclass",
    "mechanisms",
    "median",
    "privacy",
    "quantiles",
    "report",
]

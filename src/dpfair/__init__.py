"""dpfair: private and accountable decisions.

Subpackages: :mod:`dpfair.privacy` (budgets, accountant), :mod:`dpfair.mechanisms`
(Gaussian, exponential, noisy tree), :mod:`dpfair.median` (paper 004: confidence intervals
for the median under zCDP), :mod:`dpfair.facility` (paper 000: private facility location
with welfare and fairness guarantees), :mod:`dpfair.fairclass` (paper 003: classification
under a demographic-disparity cap with DP), :mod:`dpfair.data` (readers, synthetic designs,
bundled data), :mod:`dpfair.experiments` (reproducible studies), :class:`dpfair.Session`
(one privacy budget across many releases on one data set).
"""

from dpfair import data, facility, fairclass, mechanisms, median, privacy
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
from dpfair._warnings import DPFairWarning, UncertifiedFairnessWarning
from dpfair.session import Session

__version__ = "0.1.0"

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
    "facility",
    "fairclass",
    "mechanisms",
    "median",
    "privacy",
]

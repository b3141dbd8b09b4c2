"""dpfair: private and accountable decisions.

Subpackages: :mod:`dpfair.privacy` (budgets, accountant), :mod:`dpfair.mechanisms`
(Gaussian, exponential, noisy tree), :mod:`dpfair.median` (paper 004: confidence intervals
for the median under zCDP), :mod:`dpfair.facility` (paper 000: private facility location
with welfare and fairness guarantees), :mod:`dpfair.fairclass` (paper 003: classification
under a demographic-disparity cap with DP), :mod:`dpfair.data` (readers, synthetic designs,
bundled data), :mod:`dpfair.experiments` (reproducible studies).
"""

from dpfair import data, facility, fairclass, mechanisms, median, privacy
from dpfair._errors import (
    BudgetExceededError,
    DPFairError,
    InsufficientDataError,
    InvalidDataError,
    InvalidParameterError,
    MissingPublicBoundError,
    NotFittedError,
)
from dpfair._warnings import DPFairWarning, UncertifiedFairnessWarning

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DPFairError",
    "DPFairWarning",
    "InsufficientDataError",
    "InvalidDataError",
    "InvalidParameterError",
    "MissingPublicBoundError",
    "NotFittedError",
    "UncertifiedFairnessWarning",
    "__version__",
    "data",
    "facility",
    "fairclass",
    "mechanisms",
    "median",
    "privacy",
]

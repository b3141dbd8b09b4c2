"""dpfair: private and accountable decisions.

Subpackages: :mod:`dpfair.privacy` (budgets, accountant), :mod:`dpfair.mechanisms`
(Gaussian, exponential, noisy tree), :mod:`dpfair.median` (paper 004: confidence intervals
for the median under zCDP), :mod:`dpfair.data` (readers, synthetic designs, bundled data).
"""

from dpfair import data, mechanisms, median, privacy
from dpfair._errors import (
    BudgetExceededError,
    DPFairError,
    InsufficientDataError,
    InvalidDataError,
    InvalidParameterError,
    MissingPublicBoundError,
    NotFittedError,
)

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DPFairError",
    "InsufficientDataError",
    "InvalidDataError",
    "InvalidParameterError",
    "MissingPublicBoundError",
    "NotFittedError",
    "__version__",
    "data",
    "mechanisms",
    "median",
    "privacy",
]

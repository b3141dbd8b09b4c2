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

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """Import a subpackage on first access (PEP 562)."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f"dpfair.{name}")
    if name == "Session":
        return importlib.import_module("dpfair.session").Session
    raise AttributeError(f"module 'dpfair' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES, "Session"})

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

"""Exception hierarchy shared by every dpfair package.

Every exception subclasses a built-in (``ValueError`` mostly) so that ``except ValueError``
keeps working, and every message reads *argument = value: what is wrong. How to fix it.*
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DPFairError",
    "IncompatibleBudgetError",
    "InsufficientDataError",
    "InvalidDataError",
    "InvalidParameterError",
    "LedgerError",
    "MissingPublicBoundError",
    "NotFittedError",
    "ReleaseReplayError",
]


class DPFairError(Exception):
    """Root of all dpfair errors; the CLI turns these into one-line messages."""


class InvalidParameterError(DPFairError, ValueError):
    """A parameter (not data) is out of its valid range or of the wrong type."""


class MissingPublicBoundError(InvalidParameterError):
    """A public bound (data range, feature box) was not supplied."""


class InvalidDataError(DPFairError, ValueError):
    """The data themselves are unusable: empty, NaN/inf, wrong shape, outside a public domain."""


class InsufficientDataError(InvalidDataError):
    """Too few records for the requested guarantee (e.g. coverage at level alpha)."""


class BudgetExceededError(DPFairError, ValueError):
    """A release would spend more privacy budget than the accountant allows."""


class NotFittedError(DPFairError, ValueError, AttributeError):
    """An estimator was used before ``fit``."""


class IncompatibleBudgetError(InvalidParameterError):
    """A release's privacy measure cannot be charged to a cap of another measure without an
    explicit conversion (e.g. (ε, δ)-DP to a ρ-zCDP cap)."""


class LedgerError(DPFairError, ValueError):
    """A persistent privacy ledger is unusable: not a ledger, corrupt, truncated, or bound
    to another data set. Nothing was charged."""


class ReleaseReplayError(BudgetExceededError):
    """A single-use release (a protocol round, keyed by run and round) was already made;
    running it again is refused. Nothing was charged or released."""

"""Warning classes shared by every dpfair package."""

from __future__ import annotations

__all__ = ["DPFairWarning", "FreeWarning", "UncertifiedFairnessWarning"]


class DPFairWarning(UserWarning):
    """Root of dpfair's warnings."""


class UncertifiedFairnessWarning(DPFairWarning):
    """A fitted fair classifier could not be certified to keep its disparity cap.

    Raised (as a warning) by ``fit`` of :class:`~dpfair.fairclass.CDPFairClassifier` and
    :class:`~dpfair.fairclass.federated.FDPFairClassifier` when the released quantities do
    not certify |DD| ≤ α in the population (too little data or privacy budget for this α;
    the certificate's guarantee is P(|DD| > α and certified) ≤ β). The model is still
    fitted; ``certified_`` is False. Turn it into an error with
    ``warnings.simplefilter("error", UncertifiedFairnessWarning)``.
    """


class FreeWarning(DPFairWarning):
    """Advice computed from a release's output and public inputs only (no privacy cost).

    An interval end on a public bound (the bounds may not contain the median), or a budget
    so large that little privacy remains (``dpfair._advice``). The command line prints each
    as one ``dpfair: warning:`` line and lists them under ``warnings`` in ``--json``.
    """

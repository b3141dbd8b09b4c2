"""Fairness-aware classification under differential privacy (paper 003, single server).

* :class:`CDPFairClassifier` — CDP-Fair (Algorithm 5): private kernel plug-in estimates and a
  private threshold that caps the demographic disparity |DD| at α.
* Baselines with the same interface: :class:`PrivatePlugInClassifier` (privacy only),
  :class:`FairPlugInClassifier` (fairness only, Zeng et al. 2024),
  :class:`PlugInClassifier` (neither).
* :mod:`dpfair.fairclass.metrics` — error and disparity; :mod:`dpfair.fairclass.datasets` —
  the paper's simulation with its oracle, Adult and Law School loaders, a bundled Adult copy;
  the reproductions of Figures 3, 6 and 7 are registered studies (``dpfair reproduce
  fairclass-…``, :mod:`dpfair.experiments`).
* :func:`fit_cdp_fair_from_file` — CDP-Fair on a CSV/Parquet file larger than memory
  (DuckDB aggregates on the public grid, streamed calibration scores).
"""

from dpfair.fairclass import datasets, metrics
from dpfair.fairclass._budget import BudgetPlan, LedgerRecord, PrivacyLedger, plan_budget
from dpfair.fairclass._estimators import (
    CDPFairClassifier,
    FairPlugInClassifier,
    PlugInClassifier,
    PrivatePlugInClassifier,
)
from dpfair.fairclass._model import ReleasedFold, bandwidth_rule
from dpfair.fairclass._threshold import (
    ThresholdResult,
    dd_steps,
    exact_fair_threshold,
    private_fair_threshold,
)
from dpfair.fairclass.aggregate import GridAggregate, kernel_grid_weights
from dpfair.fairclass.federated import FDPFairClassifier
from dpfair.fairclass.metrics import demographic_disparity, misclassification_error
from dpfair.fairclass.outofcore import OutOfCoreFit, fit_cdp_fair_from_file
from dpfair.fairclass.sweep import fit_alpha_path

__all__ = [
    "BudgetPlan",
    "CDPFairClassifier",
    "FDPFairClassifier",
    "FairPlugInClassifier",
    "GridAggregate",
    "LedgerRecord",
    "OutOfCoreFit",
    "PlugInClassifier",
    "PrivacyLedger",
    "PrivatePlugInClassifier",
    "ReleasedFold",
    "ThresholdResult",
    "bandwidth_rule",
    "datasets",
    "dd_steps",
    "demographic_disparity",
    "exact_fair_threshold",
    "fit_alpha_path",
    "fit_cdp_fair_from_file",
    "kernel_grid_weights",
    "metrics",
    "misclassification_error",
    "plan_budget",
    "private_fair_threshold",
]

"""Fairness-aware classification under differential privacy (paper 003).

* :class:`CDPFairClassifier` — CDP-Fair (Algorithm 5): private plug-in group scores (a
  kernel estimate on a public grid, or a private logistic score for many features) and a
  private threshold that caps the demographic disparity |DD| (or, with
  ``constraints="equal_opportunity"``, the true-positive-rate difference) at α.
* Baselines with the same interface: :class:`PrivatePlugInClassifier` (privacy only),
  :class:`FairPlugInClassifier` (fairness only, Zeng et al. 2024),
  :class:`PlugInClassifier` (neither).
* :class:`FDPFairClassifier` — FDP-Fair, the federated protocol (Algorithms 1–4, 6);
  per-role objects in :mod:`dpfair.fairclass.federated`.
* :func:`fit_cdp_fair_from_file` — CDP-Fair on a CSV/Parquet file larger than memory, for
  a configured :class:`CDPFairClassifier` (DuckDB aggregates on the public grid, streamed
  calibration scores); :func:`kernel_grid_weights` — the file's S1 aggregate alone.
* :func:`fit_alpha_path` — one S1 release, one S2 per α; :func:`plan_budget` — the public
  budget split of a fit; :func:`plan_certification` — before any data are read, the
  certificate's margin and the smallest α a certified fit reaches; :func:`bandwidth_rule`
  — the public bandwidth rule.
* S2 tools: :func:`dd_steps`, :func:`exact_fair_threshold`, :func:`private_fair_threshold`.
* :mod:`dpfair.fairclass.metrics` (:func:`misclassification_error`,
  :func:`demographic_disparity`); :mod:`dpfair.fairclass.datasets` — the paper's simulation
  with its oracle, Adult and Law School (loaders in :mod:`dpfair.data.designs`); the
  reproductions of Figures 3, 6 and 7 are registered studies (``dpfair reproduce
  fairclass-…``, :mod:`dpfair.experiments`).

Every CDP-Fair fit runs one pipeline (``fairclass/_pipeline.py``) over a source: arrays in
memory, a file's DuckDB aggregates, or a Dask DataFrame's (``dpfair.session``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpfair._lazy import lazy_exports

if TYPE_CHECKING:
    from dpfair.fairclass import datasets, metrics
    from dpfair.fairclass._budget import BudgetPlan as BudgetPlan
    from dpfair.fairclass._budget import LedgerRecord as LedgerRecord
    from dpfair.fairclass._budget import PrivacyLedger as PrivacyLedger
    from dpfair.fairclass._budget import plan_budget
    from dpfair.fairclass._certify import UncertifiedFairnessError
    from dpfair.fairclass._certify import uncertified_message as uncertified_message
    from dpfair.fairclass._estimators import (
        CDPFairClassifier,
        FairPlugInClassifier,
        PlugInClassifier,
        PrivatePlugInClassifier,
    )
    from dpfair.fairclass._model import ReleasedFold as ReleasedFold
    from dpfair.fairclass._model import bandwidth_rule
    from dpfair.fairclass._plan import CertificationPlan as CertificationPlan
    from dpfair.fairclass._plan import plan_certification
    from dpfair.fairclass._threshold import ThresholdResult as ThresholdResult
    from dpfair.fairclass._threshold import (
        dd_steps,
        exact_fair_threshold,
        private_fair_threshold,
    )
    from dpfair.fairclass.aggregate import GridAggregate as GridAggregate
    from dpfair.fairclass.aggregate import kernel_grid_weights
    from dpfair.fairclass.federated import FDPFairClassifier
    from dpfair.fairclass.metrics import (
        demographic_disparity,
        equal_opportunity_difference,
        misclassification_error,
    )
    from dpfair.fairclass.outofcore import OutOfCoreFit as OutOfCoreFit
    from dpfair.fairclass.outofcore import fit_cdp_fair_from_file
    from dpfair.fairclass.sweep import fit_alpha_path

#: Exported name -> the module that defines it. Loaded on first use (PEP 562): a command
#: that needs one name (``dpfair fdp keygen``) does not pay for scikit-learn or SciPy.
_WHERE: dict[str, str] = {
    "BudgetPlan": "dpfair.fairclass._budget",
    "LedgerRecord": "dpfair.fairclass._budget",
    "PrivacyLedger": "dpfair.fairclass._budget",
    "plan_budget": "dpfair.fairclass._budget",
    "UncertifiedFairnessError": "dpfair.fairclass._certify",
    "CertificationPlan": "dpfair.fairclass._plan",
    "plan_certification": "dpfair.fairclass._plan",
    "CDPFairClassifier": "dpfair.fairclass._estimators",
    "FairPlugInClassifier": "dpfair.fairclass._estimators",
    "PlugInClassifier": "dpfair.fairclass._estimators",
    "PrivatePlugInClassifier": "dpfair.fairclass._estimators",
    "uncertified_message": "dpfair.fairclass._certify",  # for dpfair.cli.fdp
    "ReleasedFold": "dpfair.fairclass._model",
    "bandwidth_rule": "dpfair.fairclass._model",
    "ThresholdResult": "dpfair.fairclass._threshold",
    "dd_steps": "dpfair.fairclass._threshold",
    "exact_fair_threshold": "dpfair.fairclass._threshold",
    "private_fair_threshold": "dpfair.fairclass._threshold",
    "GridAggregate": "dpfair.fairclass.aggregate",
    "kernel_grid_weights": "dpfair.fairclass.aggregate",
    "FDPFairClassifier": "dpfair.fairclass.federated",
    "demographic_disparity": "dpfair.fairclass.metrics",
    "equal_opportunity_difference": "dpfair.fairclass.metrics",
    "misclassification_error": "dpfair.fairclass.metrics",
    "OutOfCoreFit": "dpfair.fairclass.outofcore",
    "fit_cdp_fair_from_file": "dpfair.fairclass.outofcore",
    "fit_alpha_path": "dpfair.fairclass.sweep",
}
_SUBMODULES = ("datasets", "metrics")


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, submodules=_SUBMODULES)


# What a user needs. The types of fitted attributes (BudgetPlan, PrivacyLedger,
# LedgerRecord, ReleasedFold, ThresholdResult, GridAggregate, OutOfCoreFit) stay importable
# from here for existing code but are not part of the advertised surface.
__all__ = [
    "CDPFairClassifier",
    "FDPFairClassifier",
    "FairPlugInClassifier",
    "PlugInClassifier",
    "PrivatePlugInClassifier",
    "UncertifiedFairnessError",
    "bandwidth_rule",
    "datasets",
    "dd_steps",
    "demographic_disparity",
    "equal_opportunity_difference",
    "exact_fair_threshold",
    "fit_alpha_path",
    "fit_cdp_fair_from_file",
    "kernel_grid_weights",
    "metrics",
    "misclassification_error",
    "plan_budget",
    "plan_certification",
    "private_fair_threshold",
]

"""Private facility location with welfare and fairness guarantees (paper 000).

Fish, Gonczarowski, Tang & Vadhan, "Tradeoffs in Privacy, Welfare, and Fairness for
Facility Location" (FORC 2026); ALGORITHMS.md §B.

* :class:`DPExpMed` — the widened exponential mechanism DPExpMed_α (ε-DP), with an exact
  O(n) sampler and the exact output law (:meth:`DPExpMed.distribution`) including the
  exact laws of FAIR and SWDIFF.
* Metrics (Def. 2.6, Thms 4.1/4.3): :func:`optimal_location`, :func:`utilities`,
  :func:`social_welfare`, :func:`loss_vector`, :func:`fair`, :func:`swdiff`,
  :func:`crossed_agents`, :func:`percentile_loss`, :func:`widened_loss`.
* Families (§6): :func:`is_ctm`, single-peaked laws (:class:`SinglePeakedLaw`), worst
  cases, lower-bound pairs (:class:`LowerBoundPair`), :func:`ks_distance`, :func:`spm_lambda`.
* Exact laws: :class:`FacilityDistribution` (what :meth:`DPExpMed.distribution` returns) and
  the base :class:`OutputDistribution` of every law (baselines included).
* Bounds (Table 1, Thm 7.9, inequality (7), …): the submodule :mod:`dpfair.facility.bounds`
  (:func:`~dpfair.facility.bounds.table1`, :func:`~dpfair.facility.bounds.ctm_bounds`, …).
* Exact worst cases over CTM (Lemma 7.8): :func:`worst_case_level`, :func:`ctm_family_max`.
* Baselines: :func:`unwidened_expmed`, :class:`LaplaceMedian`, :class:`GridExpMed`.

>>> import numpy as np
>>> from dpfair.facility import DPExpMed, fair
>>> x = np.random.default_rng(0).uniform(0.0, 1.0, 1001)
>>> mech = DPExpMed(epsilon=1.0, domain=(0.0, 1.0))
>>> dist = mech.distribution(x)
>>> dist.expected_fair() < 0.01
True
"""

from dpfair.facility import bounds
from dpfair.facility._baselines import GridExpMed, LaplaceMedian, unwidened_expmed
from dpfair.facility._families import (
    LowerBoundPair,
    SinglePeakedLaw,
    change_one_distance,
    ctm_worst_case,
    fair_lower_bound_pair,
    impossibility_pair,
    is_ctm,
    ks_distance,
    single_peaked_law,
    spm_lambda,
    spm_lower_bound_pair,
    spm_worst_case,
    triangular_law,
    truncated_normal_law,
)
from dpfair.facility._laws import FacilityDistribution, OutputDistribution
from dpfair.facility._mechanism import DPExpMed
from dpfair.facility._metrics import (
    crossed_agents,
    fair,
    loss_vector,
    optimal_location,
    percentile_loss,
    social_welfare,
    swdiff,
    utilities,
    widened_loss,
)
from dpfair.facility._worst import ctm_family_max, worst_case_level

__all__ = [
    "DPExpMed",
    "FacilityDistribution",
    "GridExpMed",
    "LaplaceMedian",
    "LowerBoundPair",
    "OutputDistribution",
    "SinglePeakedLaw",
    "bounds",
    "change_one_distance",
    "crossed_agents",
    "ctm_family_max",
    "ctm_worst_case",
    "fair",
    "fair_lower_bound_pair",
    "impossibility_pair",
    "is_ctm",
    "ks_distance",
    "loss_vector",
    "optimal_location",
    "percentile_loss",
    "single_peaked_law",
    "social_welfare",
    "spm_lambda",
    "spm_lower_bound_pair",
    "spm_worst_case",
    "swdiff",
    "triangular_law",
    "truncated_normal_law",
    "unwidened_expmed",
    "utilities",
    "widened_loss",
    "worst_case_level",
]

"""Differentially private confidence intervals for the median under zCDP (paper 004).

>>> import numpy as np, dpfair
>>> x = np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 1000)
>>> r = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), method="cdf", rng=0)
>>> r.privacy.rho
0.5
"""

from dpfair.median._api import (
    DEFAULT_GRANULARITY_FRACTION,
    METHODS,
    aggregation_depth,
    confidence_interval,
    confidence_interval_from_counts,
    nonprivate_interval,
)
from dpfair.median._expmech import expmech_target_ranks, order_statistic_law
from dpfair.median._ranks import nonprivate_ranks
from dpfair.median._result import DPCdf, MedianInterval, NonPrivateInterval

__all__ = [
    "DEFAULT_GRANULARITY_FRACTION",
    "METHODS",
    "DPCdf",
    "MedianInterval",
    "NonPrivateInterval",
    "aggregation_depth",
    "confidence_interval",
    "confidence_interval_from_counts",
    "expmech_target_ranks",
    "nonprivate_interval",
    "nonprivate_ranks",
    "order_statistic_law",
]

"""Differentially private confidence intervals for any population quantile (zCDP).

The median's four methods (paper 004, :mod:`dpfair.median`) generalised to a quantile
level q in (0, 1) with exact, asymmetric rank targets; several quantiles at once with
simultaneous coverage (one tree release serves them all); a DP CDF with a simultaneous
band; and, by default, a charged private localisation stage that sets the grid from the
data's private scale instead of the public range.

>>> import numpy as np, dpfair
>>> x = np.random.default_rng(0).lognormal(np.log(1.5), 1.0, 1000)
>>> res = dpfair.quantiles.confidence_intervals(x, [0.25, 0.5, 0.75], rho=0.5,
...                                             bounds=(-5, 15), rng=0)
>>> len(res.intervals), round(res.privacy.rho, 12)
(3, 0.5)
"""

from dpfair.quantiles._api import (
    LOCALIZE_ALPHA_FRACTION,
    LOCALIZE_RHO_FRACTION,
    QUERY_METHODS,
    QuantileWarning,
    cdf_band,
    check_request,
    confidence_interval,
    confidence_intervals,
    confidence_intervals_from_queries,
    file_queries,
    localization_depth,
    nonprivate_interval,
    nonprivate_ranks,
)
from dpfair.quantiles._result import CdfBand, QuantileInterval, QuantileIntervals

__all__ = [
    "LOCALIZE_ALPHA_FRACTION",
    "LOCALIZE_RHO_FRACTION",
    "QUERY_METHODS",
    "CdfBand",
    "QuantileInterval",
    "QuantileIntervals",
    "QuantileWarning",
    "cdf_band",
    "check_request",
    "confidence_interval",
    "confidence_intervals",
    "confidence_intervals_from_queries",
    "file_queries",
    "localization_depth",
    "nonprivate_interval",
    "nonprivate_ranks",
]

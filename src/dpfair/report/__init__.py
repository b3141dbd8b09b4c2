"""HTML report with figures, built from the public API only.

Sections: median confidence intervals (paper 004: the four private intervals against the
non-private one on synthetic and bundled real data, relative width against ρ, empirical
coverage) and facility location (paper 000: DPExpMed's exact output law on a sample,
FAIR/SWDIFF quantiles against n and ε beside Table 1's rates, the impossibility pair, the
baselines) and fair classification (paper 003: CDP-Fair and its baselines, error against α
and ε, achieved disparity against the y = x line, on the simulation and on real data; the
FDP-Fair part is an extension point). Run it with
``dpfair report --quick`` (or ``make demo``).
"""

from dpfair.report._build import ReportConfig, build_report
from dpfair.report._facility import FacilityReportConfig
from dpfair.report._fairclass import FairclassReportConfig
from dpfair.report._median import MedianReportConfig

__all__ = [
    "FacilityReportConfig",
    "FairclassReportConfig",
    "MedianReportConfig",
    "ReportConfig",
    "build_report",
]

"""HTML report with figures, built from the public API only.

For now it holds the median section (paper 004): the four private confidence intervals
against the non-private one on synthetic and bundled real data, relative width against ρ,
and empirical coverage. Run it with ``dpfair report --quick`` (or ``make demo``).
"""

from dpfair.report._build import ReportConfig, build_report
from dpfair.report._median import MedianReportConfig

__all__ = ["MedianReportConfig", "ReportConfig", "build_report"]

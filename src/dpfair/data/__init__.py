"""Data access: CSV/Parquet columns via DuckDB, synthetic designs, bundled data sets.

* :func:`read_column` — one numeric column of a CSV or Parquet file as float64, with
  errors (never silent drops) for missing columns, non-numeric types, NULLs, NaN and inf.
* :func:`histogram_counts` — exact bin counts of one column computed by DuckDB in one
  streaming pass, for files larger than memory (the median's aggregated path).
* :mod:`dpfair.data.synthetic` — designs with known population medians (:data:`DESIGNS`),
  including the paper's log-normal design (:func:`lognormal_sample`).
* :func:`load_bundled` — small real data sets shipped with the package, with their
  licences in ``dpfair/data/bundled/`` (currently ``"adult_age"``, UCI Adult, CC BY 4.0).
"""

from dpfair.data import synthetic
from dpfair.data._aggregate import histogram_counts
from dpfair.data._bundled import BUNDLED, BundledDataset, bundled_path, load_bundled
from dpfair.data._io import FileFormat, detect_format, list_columns, read_column
from dpfair.data.synthetic import DESIGNS, Design, get_design, lognormal_sample

__all__ = [
    "BUNDLED",
    "DESIGNS",
    "BundledDataset",
    "Design",
    "FileFormat",
    "bundled_path",
    "detect_format",
    "get_design",
    "histogram_counts",
    "list_columns",
    "load_bundled",
    "lognormal_sample",
    "read_column",
    "synthetic",
]

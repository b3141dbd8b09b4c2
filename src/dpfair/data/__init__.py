"""Data access: CSV/Parquet columns via DuckDB, synthetic designs, bundled data sets.

* :func:`read_column` — one numeric column of a CSV or Parquet file as float64, with
  errors (never silent drops) for missing columns, non-numeric types, NULLs, NaN and inf.
* :func:`histogram_counts` — exact bin counts of one column computed by DuckDB in one
  streaming pass, for files larger than memory (the median's aggregated path).
* :mod:`dpfair.data.synthetic` — designs with known population medians (:data:`DESIGNS`),
  including the paper's log-normal design (:func:`lognormal_sample`).
* :func:`export_dataset` — write a bundled data set as CSV, whole or split into train and
  test (``dpfair datasets export``).
* :func:`load_bundled` — small real data sets shipped with the package, with their
  licences in ``dpfair/data/bundled/`` (currently ``"adult_age"``, UCI Adult, CC BY 4.0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpfair._lazy import lazy_exports

if TYPE_CHECKING:
    from dpfair.data import synthetic
    from dpfair.data._aggregate import histogram_counts
    from dpfair.data._bundled import BUNDLED, BundledDataset, bundled_path, load_bundled
    from dpfair.data._io import FileFormat, check_path, detect_format, list_columns, read_column
    from dpfair.data._paths import AGGREGATE_ROWS, row_count, use_out_of_core
    from dpfair.data.export import export_dataset
    from dpfair.data.synthetic import DESIGNS, Design, get_design, lognormal_sample

# Imported on first use (PEP 562), so a reader does not load SciPy and a design not DuckDB.
_WHERE = {
    "histogram_counts": "dpfair.data._aggregate",
    "BUNDLED": "dpfair.data._bundled",
    "BundledDataset": "dpfair.data._bundled",
    "bundled_path": "dpfair.data._bundled",
    "load_bundled": "dpfair.data._bundled",
    "FileFormat": "dpfair.data._io",
    "check_path": "dpfair.data._io",
    "detect_format": "dpfair.data._io",
    "list_columns": "dpfair.data._io",
    "read_column": "dpfair.data._io",
    "AGGREGATE_ROWS": "dpfair.data._paths",
    "row_count": "dpfair.data._paths",
    "use_out_of_core": "dpfair.data._paths",
    "export_dataset": "dpfair.data.export",
    "DESIGNS": "dpfair.data.synthetic",
    "Design": "dpfair.data.synthetic",
    "get_design": "dpfair.data.synthetic",
    "lognormal_sample": "dpfair.data.synthetic",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, submodules=("synthetic",))


__all__ = [
    "AGGREGATE_ROWS",
    "BUNDLED",
    "DESIGNS",
    "BundledDataset",
    "Design",
    "FileFormat",
    "bundled_path",
    "check_path",
    "detect_format",
    "export_dataset",
    "get_design",
    "histogram_counts",
    "list_columns",
    "load_bundled",
    "lognormal_sample",
    "read_column",
    "row_count",
    "synthetic",
    "use_out_of_core",
]

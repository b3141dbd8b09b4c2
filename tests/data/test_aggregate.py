"""DuckDB aggregation must reproduce leaf_counts exactly, including values on the edges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfair import InvalidDataError, InvalidParameterError
from dpfair.data import histogram_counts
from dpfair.mechanisms import leaf_counts, leaf_edges


def _write(tmp_path, x, fmt="parquet", name="x"):
    if fmt == "parquet":
        path = tmp_path / "data.parquet"
        pq.write_table(pa.table({name: x}), path)
    else:
        path = tmp_path / "data.csv"
        path.write_text(name + "\n" + "\n".join(repr(float(v)) for v in x) + "\n")
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize(("bounds", "depth"), [((-5.0, 15.0), 9), ((0.0, 100.0), 12),
                                               ((-1e6, 3.3), 5)])
def test_counts_equal_leaf_counts_on_adversarial_values(tmp_path, fmt, bounds, depth):
    rng = np.random.default_rng(0)
    edges = leaf_edges(bounds, depth)
    x = np.concatenate([
        rng.uniform(bounds[0] - 5, bounds[1] + 5, 5000),
        edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
        np.round(rng.uniform(*bounds, 2000)),  # integer atoms, often on edges
        [bounds[0] - 1e9, bounds[1] + 1e9],
    ])
    counts = histogram_counts(_write(tmp_path, x, fmt), "x", bounds, depth)
    np.testing.assert_array_equal(counts, leaf_counts(np.clip(x, *bounds), bounds, depth))


def test_errors(tmp_path):
    path = _write(tmp_path, np.array([1.0, np.nan, np.inf]))
    with pytest.raises(InvalidDataError, match=r"2 NaN/infinite"):
        histogram_counts(path, "x", (0, 1), 3)
    path = _write(tmp_path, np.array([1.0, 2.0]))
    with pytest.raises(InvalidParameterError, match="column='y'"):
        histogram_counts(path, "y", (0, 1), 3)
    with pytest.raises(InvalidParameterError, match="depth"):
        histogram_counts(path, "x", (0, 1), 0)
    with pytest.raises(InvalidParameterError, match="bounds"):
        histogram_counts(path, "x", (1, 0), 3)


def test_nulls_are_reported(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text("x\n1.0\n\n2.0\nNA\n")
    with pytest.raises(InvalidDataError, match="missing"):
        histogram_counts(path, "x", (0, 3), 2)

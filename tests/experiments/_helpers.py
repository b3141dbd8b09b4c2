"""Helpers shared by the experiment tests."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def assert_tables_equal(a: pa.Table, b: pa.Table) -> None:
    """Same columns, types and values (NaN equal to NaN), row by row."""
    assert a.column_names == b.column_names
    assert a.schema.equals(b.schema), (a.schema, b.schema)
    assert a.num_rows == b.num_rows
    for name in a.column_names:
        x = a.column(name).to_numpy(zero_copy_only=False)
        y = b.column(name).to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), name
        else:
            assert (x == y).all(), name

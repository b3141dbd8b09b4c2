"""DuckDB aggregation of a training file onto the classifier's public kernel grid."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from dpfair import InvalidDataError
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._model import kernel_cell_weights
from dpfair.fairclass.aggregate import kernel_grid_weights
from dpfair.fairclass.datasets import simulate

BOUNDS = ((-2.0, 3.0), (0.0, 10.0))


def _adversarial(grid, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points on grid nodes, on the box's faces, one ulp off nodes, duplicates, random."""
    nodes = [lo + ax * (hi - lo) for ax, (lo, hi) in zip(grid.axes, BOUNDS, strict=True)]
    on = np.column_stack([rng.choice(n, 300) for n in nodes])
    ulp = on.copy()
    ulp[:150] = np.nextafter(ulp[:150], np.inf)
    ulp[150:] = np.nextafter(ulp[150:], -np.inf)
    ulp = np.clip(ulp, [b[0] for b in BOUNDS], [b[1] for b in BOUNDS])
    faces = np.array([[BOUNDS[0][0], BOUNDS[1][1]], [BOUNDS[0][1], BOUNDS[1][0]],
                      [BOUNDS[0][1], BOUNDS[1][1]], [BOUNDS[0][0], BOUNDS[1][0]]] * 5)
    rand = np.column_stack([rng.uniform(lo, hi, 2000) for lo, hi in BOUNDS])
    X = np.vstack([on, ulp, faces, rand, rand[:100]])
    A = rng.integers(0, 2, X.shape[0]).astype(np.int8)
    y = rng.integers(0, 2, X.shape[0]).astype(np.int8)
    return X, A, y


def _in_memory(grid, X, A, y) -> np.ndarray:
    lo = np.array([b[0] for b in BOUNDS])
    hi = np.array([b[1] for b in BOUNDS])
    U = (X - lo) / (hi - lo)
    return kernel_cell_weights(grid, U, A, y)


def _float_binning(grid, X, A, y) -> np.ndarray:
    lo = np.array([b[0] for b in BOUNDS])
    hi = np.array([b[1] for b in BOUNDS])
    U = (X - lo) / (hi - lo)
    out = np.empty((*grid.shape, 2, 2))
    for a in (0, 1):
        for yy in (0, 1):
            out[..., a, yy] = grid.linear_binning(U[(A == a) & (y == yy)])
    return out


def _write(path: Path, X, A, y, fmt: str) -> Path:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    table = pa.table({"x1": X[:, 0], "x2": X[:, 1], "grp": A.astype(np.int64),
                      "label": y.astype(np.int64)})
    if fmt == "parquet":
        pq.write_table(table, path)
    else:
        pcsv.write_csv(table, path)
    return path


@pytest.fixture(scope="module")
def grid():
    data = simulate(2000, rng=0)
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, feature_bounds=data.feature_bounds,
                            random_state=0).fit(data.X, data.y, sensitive_features=data.A)
    return clf.grid_


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_weights_equal_linear_binning_on_adversarial_values(grid, tmp_path: Path,
                                                            fmt: str) -> None:
    X, A, y = _adversarial(grid, np.random.default_rng(1))
    path = _write(tmp_path / f"train.{fmt}", X, A, y, fmt)
    bits = grid.binning_bits(X.shape[0], 2)
    agg = kernel_grid_weights(path, ["x1", "x2"], "label", "grp", BOUNDS, grid, bits=bits)
    want = _in_memory(grid, X, A, y)
    assert agg.n == X.shape[0] and agg.bits == bits
    assert np.array_equal(agg.weights, want)  # the same exact integers
    assert agg.weights.sum() == X.shape[0]  # each row adds exactly 1
    # the integer binning is the float linear binning up to the 2^-q rounding of fractions
    assert np.max(np.abs(agg.weights - _float_binning(grid, X, A, y))) <= (
        X.shape[0] * 2 * 2.0**-bits)
    for a in (0, 1):
        for yy in (0, 1):
            assert agg.counts[a, yy] == np.sum((A == a) & (y == yy))
    # the kernel sums of S1 (what kernel_cell_sums computes from points)
    assert np.allclose(agg.kernel_sums(grid), grid.kernel_apply(want), rtol=1e-12,
                       atol=1e-9)


def test_bad_values_are_counted_errors(grid, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT * FROM (VALUES (0.5, 1.0, 0, 1), (NULL, 2.0, 1, 0),
                 ('nan'::DOUBLE, 2.0, 1, 0), (0.1, 20.0, 1, 1), (0.1, 2.0, 2, 1))
                 t(x1, x2, grp, label)) TO '{path}' (HEADER)""")
    with pytest.raises(InvalidDataError, match=r"2 row\(s\) with NULL/NaN.*1 row\(s\) whose.*"
                                               r"1 row\(s\) with a feature outside"):
        kernel_grid_weights(path, ["x1", "x2"], "label", "grp", BOUNDS, grid)


def test_clip_matches_clipped_points(grid, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.uniform(-4, 5, 500), rng.uniform(-1, 11, 500)])
    A = rng.integers(0, 2, 500).astype(np.int8)
    y = rng.integers(0, 2, 500).astype(np.int8)
    path = _write(tmp_path / "c.parquet", X, A, y, "parquet")
    agg = kernel_grid_weights(path, ["x1", "x2"], "label", "grp", BOUNDS, grid, clip=True,
                              bits=grid.binning_bits(500, 2))
    lo = np.array([b[0] for b in BOUNDS])
    hi = np.array([b[1] for b in BOUNDS])
    Xc = lo + np.clip((X - lo) / (hi - lo), 0, 1) * (hi - lo)
    assert np.allclose(agg.weights, _in_memory(grid, Xc, A, y), rtol=1e-12, atol=1e-12)

"""DuckDB binning and leaf_counts follow one exact rule (issue 15, item 7).

When ulp(lo) is not negligible against the bin width, the float grid g_j differs from the
ideal lo + j·w by more than the 1e-6 bin tolerance DuckDB used, so a value on an edge
landed in bin 7 in one path and bin 6 in the other (bounds (1e6, 1e6 + 0.001), depth 9;
1 random file in 30). Both must now give identical counts on every file.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfair.data import histogram_counts
from dpfair.mechanisms import leaf_counts, leaf_edges


def _adversarial_values(rng: np.random.Generator, lo: float, hi: float, depth: int):
    edges = leaf_edges((lo, hi), depth)
    pick = edges[rng.integers(0, edges.size, min(edges.size, 300))]
    near = [pick]
    for k in (1, 2, 3, 5, 8):  # a few ulps either side of the float edges
        up, down = pick.copy(), pick.copy()
        for _ in range(k):
            up, down = np.nextafter(up, np.inf), np.nextafter(down, -np.inf)
        near += [up, down]
    ideal = lo + (hi - lo) / 2**depth * np.arange(2**depth + 1)  # another rounding of g_j
    return np.concatenate([
        *near,
        ideal[rng.integers(0, ideal.size, min(ideal.size, 300))],
        rng.uniform(lo, hi, 1000),
        rng.uniform(lo - (hi - lo), hi + (hi - lo), 50),  # clipped into the range
    ])


def _cases():
    yield "issue-1e6", (1e6, 1e6 + 0.001), 9
    yield "issue-1e6-depth12", (1e6, 1e6 + 0.001), 12
    yield "negative-offset", (-1e9 - 0.5, -1e9 + 0.25), 10
    rng = np.random.default_rng(2026)
    for i in range(27):
        offset = float(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-3, 12))
        width = float(10.0 ** rng.uniform(-4, 3))
        yield f"random-{i}", (offset, offset + width), int(rng.integers(1, 14))


CASES = [c for c in _cases() if c[1][0] < c[1][1]]


@pytest.mark.parametrize(("name", "bounds", "depth"), CASES, ids=[c[0] for c in CASES])
def test_duckdb_counts_equal_leaf_counts(tmp_path, name, bounds, depth):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = _adversarial_values(rng, *bounds, depth)
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"x": x}), path)
    got = histogram_counts(path, "x", bounds, depth)
    want = leaf_counts(np.clip(x, *bounds), bounds, depth)
    np.testing.assert_array_equal(got, want)
    assert got.sum() == x.size

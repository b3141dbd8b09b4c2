"""The one-key DuckDB histogram (near-edge values placed in SQL) equals the binning rule.

Also: the tree methods on a file (out of core) release exactly what they release in memory.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfair
from dpfair import InvalidDataError
from dpfair.data import _aggregate, histogram_counts
from dpfair.mechanisms import leaf_counts, leaf_edges


def _write(tmp_path, x, fmt="parquet"):
    if fmt == "parquet":
        path = tmp_path / "data.parquet"
        pq.write_table(pa.table({"x": x}), path)
    else:
        path = tmp_path / "data.csv"
        path.write_text("x\n" + "\n".join(repr(float(v)) for v in x) + "\n")
    return path


def _adversarial(rng, bounds, depth):
    lo, hi = bounds
    edges = leaf_edges(bounds, depth)
    span = hi - lo
    return np.concatenate([
        rng.uniform(lo - span / 4, hi + span / 4, 3000),
        edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
        np.nextafter(np.nextafter(edges, np.inf), np.inf),
        np.round(rng.uniform(lo, hi, 1000)),
        [lo - 1e300, hi + 1e300, -1e308, 1e308],
    ])


@pytest.fixture
def no_general_query(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("the general (grouped-by-value) query ran")

    monkeypatch.setattr(_aggregate, "_grouped_sql", refuse)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize(("bounds", "depth"), [
    ((-5.0, 15.0), 9), ((0.0, 100.0), 14), ((-1e6, 3.3), 1), ((1e6, 1e6 + 0.001), 9),
    ((-3.0, -1.0), 5), ((0.1, 0.7), 12),
])
def test_one_key_query_equals_rule(tmp_path, fmt, bounds, depth, seed, no_general_query):
    x = _adversarial(np.random.default_rng(seed), bounds, depth)
    got = histogram_counts(_write(tmp_path, x, fmt), "x", bounds, depth)
    np.testing.assert_array_equal(got, leaf_counts(np.clip(x, *bounds), bounds, depth))


def test_general_query_still_exact_and_same(tmp_path, monkeypatch, seed):
    bounds, depth = (-5.0, 15.0), 9
    x = _adversarial(np.random.default_rng(seed), bounds, depth)
    path = _write(tmp_path, x)
    fast = histogram_counts(path, "x", bounds, depth)
    monkeypatch.setattr(_aggregate, "_EXACT_IN_SQL_TOL", -1.0)  # force the general query
    np.testing.assert_array_equal(histogram_counts(path, "x", bounds, depth), fast)


def test_tiny_ranges_use_the_general_query(tmp_path):
    # 2^12 bins over a range holding ~2^12 floats: the tolerance exceeds 1/4 bin
    lo = 1.0
    hi = lo + 4096 * np.spacing(lo)
    x = np.concatenate([leaf_edges((lo, hi), 12), [lo + 3 * np.spacing(lo)]])
    got = histogram_counts(_write(tmp_path, x), "x", (lo, hi), 12)
    np.testing.assert_array_equal(got, leaf_counts(np.clip(x, lo, hi), (lo, hi), 12))


def test_errors_on_fast_path(tmp_path, no_general_query):
    path = _write(tmp_path, np.array([1.0, np.nan, np.inf, -np.inf]))
    with pytest.raises(InvalidDataError, match=r"0 missing \(NULL\) and 3 NaN/infinite"):
        histogram_counts(path, "x", (0, 1), 3)
    csv = tmp_path / "n.csv"
    csv.write_text("x\n1.0\n\n2.0\n")
    with pytest.raises(InvalidDataError, match=r"1 missing"):
        histogram_counts(csv, "x", (0, 3), 2)


@pytest.mark.parametrize("method", ["cdf", "binsearch", "binsearch_cdf"])
@pytest.mark.parametrize("design", ["lognormal", "ties", "clipped"])
def test_out_of_core_release_identical_to_in_memory(tmp_path, method, design, seed):
    rng = np.random.default_rng(seed + 31)
    bounds = (-5.0, 15.0)
    x = {"lognormal": rng.lognormal(np.log(1.5), 1.0, 4000),
         "ties": np.round(rng.lognormal(np.log(1.5), 1.0, 4000), 1),
         "clipped": rng.normal(13.0, 4.0, 4000)}[design]
    path = _write(tmp_path, x)
    depth = dpfair.median.aggregation_depth(method, bounds)
    for s in range(3):
        mem = dpfair.median.confidence_interval(x, rho=0.5, bounds=bounds, method=method,
                                                rng=s)
        agg = dpfair.median.confidence_interval_from_counts(
            histogram_counts(path, "x", bounds, depth), rho=0.5, bounds=bounds,
            method=method, rng=s,
            refine=lambda sub, d: histogram_counts(path, "x", sub, d))
        assert (agg.low, agg.high) == (mem.low, mem.high)
        if mem.cdf is not None:
            np.testing.assert_array_equal(agg.cdf.values, mem.cdf.values)


def test_quantile_tree_from_file_identical_to_in_memory(tmp_path, seed):
    """Several quantiles from one tree: a file's counts give exactly the in-memory release."""
    from dpfair.mechanisms.tree import leaf_counts_sorted
    from dpfair.median._cdf import release_cdf_tree

    rng = np.random.default_rng(seed + 5)
    x = np.concatenate([rng.lognormal(0.4, 1.0, 3000), np.full(200, 2.0), [-30.0, 99.0]])
    bounds, depth = (-5.0, 15.0), 9
    path = _write(tmp_path, x)
    mem = release_cdf_tree(leaf_counts_sorted(np.sort(x), bounds, depth), 0.5, bounds, depth,
                           np.random.default_rng(seed))
    disk = release_cdf_tree(histogram_counts(path, "x", bounds, depth), 0.5, bounds, depth,
                            np.random.default_rng(seed))
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        assert mem.interval(q, 0.01)[:2] == disk.interval(q, 0.01)[:2]
    np.testing.assert_array_equal(mem.cdf.values, disk.cdf.values)

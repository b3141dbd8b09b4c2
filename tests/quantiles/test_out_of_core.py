"""Files larger than memory: the tree and search methods from count queries (DuckDB)
give the SAME intervals as the data in memory, for the same seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfair
from dpfair._errors import InvalidParameterError

QS = [0.1, 0.5, 0.9]
pytestmark = pytest.mark.filterwarnings("ignore::dpfair.quantiles.QuantileWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ooc")
    rng = np.random.default_rng(9)
    x = rng.lognormal(np.log(1.5), 1.0, 4000)
    x[:200] = 30.0  # beyond the public bounds: clipped, never dropped
    x[200:400] = np.round(x[200:400], 1)  # ties
    csv = root / "big.csv"
    csv.write_text("v\n" + "".join(f"{float(v)!r}\n" for v in x))
    par = root / "big.parquet"
    pq.write_table(pa.table({"v": x}), par)
    return {"csv": csv, "parquet": par}


def _same(a: dpfair.quantiles.QuantileIntervals, b: dpfair.quantiles.QuantileIntervals) -> None:
    assert [(i.low, i.high, i.n) for i in a.intervals] == [
        (i.low, i.high, i.n) for i in b.intervals]
    assert a.privacy.rho == b.privacy.rho


@pytest.mark.parametrize("kind", ["csv", "parquet"])
@pytest.mark.parametrize("method", ["cdf", "binsearch_cdf", "binsearch"])
@pytest.mark.parametrize("granularity", [None, 0.05])
def test_file_queries_equal_memory(files: dict[str, Path], kind: str, method: str,
                                   granularity: float | None) -> None:
    path = files[kind]
    x = dpfair.data.read_column(path, "v")
    mem = dpfair.quantiles.confidence_intervals(x, QS, rho=0.5, bounds=(-5, 15),
                                                method=method, granularity=granularity,
                                                rng=21)
    n, count, hist = dpfair.quantiles.file_queries(path, "v")
    assert n == x.size
    ooc = dpfair.quantiles.confidence_intervals_from_queries(
        n, count, hist, QS, rho=0.5, bounds=(-5, 15), method=method,
        granularity=granularity, rng=21)
    _same(mem, ooc)


def test_expmech_refused_out_of_core(files: dict[str, Path]) -> None:
    n, count, hist = dpfair.quantiles.file_queries(files["csv"], "v")
    with pytest.raises(InvalidParameterError, match="method='expmech'"):
        dpfair.quantiles.confidence_intervals_from_queries(
            n, count, hist, QS, rho=0.5, bounds=(-5, 15), method="expmech", rng=1)


def test_bad_histogram_provider_named(files: dict[str, Path]) -> None:
    n, count, _ = dpfair.quantiles.file_queries(files["csv"], "v")
    with pytest.raises(InvalidParameterError, match="histogram"):
        dpfair.quantiles.confidence_intervals_from_queries(
            n, count, lambda sub, d: np.zeros(2**d, dtype=np.int64), QS, rho=0.5,
            bounds=(-5, 15), method="cdf", rng=1)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_session_file_aggregated_equals_memory(files: dict[str, Path], kind: str) -> None:
    import warnings

    from dpfair.privacy import Budget

    path = files[kind]
    x = dpfair.data.read_column(path, "v")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_file = dpfair.Session(path, budget=Budget.zcdp(1.0), reproducible_seed=5).quantile_ci(
            "v", QS, rho=0.5, bounds=(-5, 15), aggregate="always")
        in_memory = dpfair.Session({"v": x}, budget=Budget.zcdp(1.0),
                                   reproducible_seed=5).quantile_ci(
            "v", QS, rho=0.5, bounds=(-5, 15))
    _same(on_file, in_memory)
    assert on_file.diagnostics == in_memory.diagnostics


def test_session_file_single_level_and_refusals(files: dict[str, Path]) -> None:
    import warnings

    from dpfair.privacy import Budget

    path = files["parquet"]
    x = dpfair.data.read_column(path, "v")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s_file = dpfair.Session(path, budget=Budget.zcdp(1.0), reproducible_seed=8)
        one = s_file.quantile_ci("v", 0.9, rho=0.25, bounds=(-5, 15), method="binsearch",
                                 aggregate="always")
        rec = s_file.last_record
        assert rec is not None and rec.params["aggregated"] is True
        ref = dpfair.Session({"v": x}, budget=Budget.zcdp(1.0),
                             reproducible_seed=8).quantile_ci(
            "v", 0.9, rho=0.25, bounds=(-5, 15), method="binsearch")
        assert (one.low, one.high) == (ref.low, ref.high)
        spent = s_file.spent
        with pytest.raises(InvalidParameterError, match="aggregate='always'"):
            s_file.quantile_ci("v", 0.5, rho=0.25, bounds=(-5, 15), method="expmech",
                               aggregate="always")
        assert s_file.spent == spent  # refused on public arguments: nothing charged

"""A Session on a Dask DataFrame, on a real LocalCluster with worker processes: the median's
bin counts are computed on the workers and only the histogram comes back; results equal the
DuckDB path on a Parquet file with the same rows, for the same seed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpfair
from dpfair import InvalidDataError, Session
from dpfair.privacy import Budget

dd = pytest.importorskip(
    "dask.distributed", reason="the [dask] extra is not installed: pip install 'dpfair[dask]'"
)
ddf_mod = pytest.importorskip("dask.dataframe")

BOUNDS = (-5.0, 15.0)
pytestmark = pytest.mark.filterwarnings("ignore::dpfair.session.ReproducibleSeedWarning")


def stream(seed: int, k: int = 0) -> np.random.Generator:
    """The generator of release k of a session opened with reproducible_seed=seed."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))


@pytest.fixture(scope="module")
def client() -> Any:
    with dd.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=":0") as cluster, dd.Client(cluster) as c:
        pids = c.run(os.getpid)
        assert len(pids) == 2 and os.getpid() not in pids.values()
        yield c


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    x = rng.lognormal(np.log(1.5), 1.0, 6000)
    x[:300] = np.round(x[:300])  # atoms on grid edges
    x[300:320] = 40.0  # outside the bounds: clipped
    return pd.DataFrame({"v": x, "w": rng.normal(size=x.size)})


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory, frame: pd.DataFrame) -> Path:
    path = tmp_path_factory.mktemp("dask") / "d.parquet"
    frame.to_parquet(path, index=False)
    return path


def test_histogram_on_the_cluster_equals_duckdb(client: Any, frame: pd.DataFrame,
                                                parquet: Path) -> None:
    from dpfair.session._dask import histogram_counts

    lazy = ddf_mod.from_pandas(frame, npartitions=5)
    with dd.get_task_stream(client) as ts:
        got = histogram_counts(lazy, "v", BOUNDS, 12)
    want = dpfair.data.histogram_counts(parquet, "v", BOUNDS, 12)
    np.testing.assert_array_equal(got, want)
    keys = [str(t["key"]) for t in ts.data]
    workers = {t["worker"] for t in ts.data if "_partition_histogram" in str(t["key"])}
    assert sum("_partition_histogram" in k for k in keys) == 5  # one task per partition
    assert workers <= set(client.scheduler_info()["workers"])  # ran on the workers


@pytest.mark.parametrize("method", ["cdf", "binsearch", "binsearch_cdf", "expmech"])
def test_session_median_equals_duckdb_path(client: Any, frame: pd.DataFrame, parquet: Path,
                                           method: str) -> None:
    lazy = ddf_mod.from_pandas(frame, npartitions=4)
    on_cluster = Session(lazy, budget=Budget.zcdp(1.0), reproducible_seed=7)
    on_file = Session(parquet, budget=Budget.zcdp(1.0), reproducible_seed=7)
    a = on_cluster.median_ci("v", rho=0.5, bounds=BOUNDS, method=method)
    b = on_file.median_ci("v", rho=0.5, bounds=BOUNDS, method=method, aggregate="always")
    assert (a.low, a.high, a.n) == (b.low, b.high, b.n)
    assert on_cluster.records[0].params["aggregated"] is True
    assert on_cluster.spent == on_file.spent
    if method != "expmech":  # the tree methods: identical to the raw in-memory data too
        c = dpfair.median.confidence_interval(frame["v"].to_numpy(), rho=0.5, bounds=BOUNDS,
                                              method=method, rng=stream(7))
        assert (a.low, a.high) == (c.low, c.high)


def test_dask_missing_values_refused_charged_without_details(client: Any,
                                                              frame: pd.DataFrame) -> None:
    """A failure on the data is a release: charged, and its message names no count."""
    bad = frame.copy()
    bad.loc[17, "v"] = np.nan
    bad.loc[4000, "v"] = np.inf
    s = Session(ddf_mod.from_pandas(bad, npartitions=3), budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidDataError, match="withheld") as err:
        s.median_ci("v", rho=0.5, bounds=BOUNDS, method="cdf")
    assert "missing" not in str(err.value) and "4000" not in str(err.value)
    assert s.spent.rho == pytest.approx(0.5)


def test_dask_facility_and_refusal(client: Any, frame: pd.DataFrame) -> None:
    lazy = ddf_mod.from_pandas(frame, npartitions=3)
    s = Session(lazy, budget=Budget.zcdp(0.2), reproducible_seed=3)
    loc = s.place_facility("w", epsilon=1.0, domain=(-10.0, 10.0))
    ref = dpfair.facility.DPExpMed(1.0, (-10.0, 10.0)).sample(frame["w"].to_numpy(),
                                                              rng=stream(3))
    assert loc == ref
    assert s.spent.rho == pytest.approx(0.125)
    with pytest.raises(dpfair.BudgetExceededError):
        s.median_ci("v", rho=0.1, bounds=BOUNDS)


# ------------------------------------------------------------------ CDP-Fair on the cluster
FAIR = dict(features=["x1", "x2"], target="y", sensitive="a", epsilon=1.0, delta=1e-6,
            alpha=0.1, feature_bounds=[(0.0, 1.0), (0.0, 1.0)])


@pytest.fixture(scope="module")
def fair_frame() -> pd.DataFrame:
    from dpfair.fairclass.datasets import simulate

    d = simulate(5000, rng=4)
    return pd.DataFrame({"x1": d.X[:, 0], "x2": d.X[:, 1], "y": d.y.astype(np.int64),
                         "a": d.A.astype(np.int64)})


def test_session_fair_classifier_on_cluster_equals_duckdb_path(
    client: Any, fair_frame: pd.DataFrame, tmp_path: Path
) -> None:
    cross_fit = True  # both halves are training and calibration halves
    from dpfair.fairclass import fit_cdp_fair_from_file

    path = tmp_path / "train.parquet"
    fair_frame.to_parquet(path, index=False)
    s = Session(ddf_mod.from_pandas(fair_frame, npartitions=5), budget=Budget.approx(2, 1e-5),
                reproducible_seed=9)
    with dd.get_task_stream(client) as ts:
        clf = s.fit_fair_classifier(**FAIR, cross_fit=cross_fit)
    ref = fit_cdp_fair_from_file(path, **FAIR, random_state=stream(9), cross_fit=cross_fit)
    assert clf.outofcore_.half_sizes == ref.outofcore_.half_sizes  # the same position split
    for a, b in zip(clf.folds_, ref.folds_, strict=True):
        np.testing.assert_allclose(a.eta, b.eta, rtol=0, atol=1e-9)
        np.testing.assert_allclose(a.pi, b.pi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(clf.tau_, ref.tau_, rtol=0, atol=1e-12)
    X = fair_frame[["x1", "x2"]].to_numpy()
    np.testing.assert_array_equal(clf.predict(X, sensitive_features=fair_frame["a"]),
                                  ref.predict(X, sensitive_features=fair_frame["a"]))
    assert s.records[-1].cost == clf.privacy_spent_ == ref.privacy_spent_
    assert s.records[-1].params["aggregated"] is True
    keys = [str(t["key"]) for t in ts.data]
    passes = 2 if cross_fit else 1
    assert sum("_weights_task" in k for k in keys) == 5 * passes  # one task per partition
    assert sum("_scores_task" in k for k in keys) == 5


def test_fair_bad_rows_on_cluster_refused_and_charged(client: Any,
                                                          fair_frame: pd.DataFrame) -> None:
    bad = fair_frame.copy()
    bad.loc[10, "a"] = 2
    bad.loc[20, "x1"] = 1.5
    bad.loc[30, "x2"] = np.nan
    s = Session(ddf_mod.from_pandas(bad, npartitions=3), budget=Budget.approx(2, 1e-5))
    with pytest.raises(InvalidDataError) as err:
        s.fit_fair_classifier(**FAIR)
    msg = str(err.value)
    assert "withheld" in msg and "NULL" not in msg and "1.5" not in msg
    assert s.spent.epsilon > 0  # the failure is a release: charged

"""One CDP-Fair pipeline, three sources: the same seed gives the same release.

Through the public API only: :class:`~dpfair.fairclass.CDPFairClassifier` on arrays (with
``split="position"``, the split the out-of-core sources use), the same configured estimator
on a Parquet/CSV file through :func:`~dpfair.fairclass.fit_cdp_fair_from_file` and through a
:class:`~dpfair.Session` forced onto DuckDB aggregates (``aggregate="always"``), and a Dask
DataFrame through a Session (skipped without the ``[dask]`` extra). Same predictions, same
released numbers, same ``privacy_spent_``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from dpfair import InvalidParameterError, Session, UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, fit_cdp_fair_from_file
from dpfair.fairclass.datasets import simulate
from dpfair.privacy import Budget
from dpfair.session import ReproducibleSeedWarning

FEATURES = ["x1", "x2"]
SETTINGS = dict(epsilon=1.0, delta=1e-6, alpha=0.15)


@pytest.fixture(scope="module")
def data() -> Any:
    return simulate(4000, rng=21)


@pytest.fixture(scope="module")
def test_rows() -> Any:
    return simulate(1500, rng=22)


@pytest.fixture(scope="module")
def frame(data: Any) -> pd.DataFrame:
    return pd.DataFrame({"x1": data.X[:, 0], "x2": data.X[:, 1],
                         "y": data.y.astype(np.int64), "a": data.A.astype(np.int64)})


@pytest.fixture(scope="module")
def files(frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sources")
    pq, csv = folder / "train.parquet", folder / "train.csv"
    frame.to_parquet(pq, index=False)
    frame.to_csv(csv, index=False)
    return {"parquet": pq, "csv": csv}


def _estimator(data: Any, **kw: Any) -> CDPFairClassifier:
    kw.setdefault("random_state", 5)
    return CDPFairClassifier(**SETTINGS, feature_bounds=data.feature_bounds, split="position",
                             **kw)


def _session_stream(seed: int, k: int = 0) -> np.random.Generator:
    """The generator of release k of a Session opened with ``reproducible_seed=seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))


def _ledger(clf: CDPFairClassifier) -> list[tuple[Any, ...]]:
    """The charged entries without their wall-clock time."""
    return [(r.label, r.rows, r.cost, r.charged, r.noise, r.key, r.part_of)
            for r in clf.privacy_ledger_.records]


def _quiet(fit: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        warnings.simplefilter("ignore", ReproducibleSeedWarning)
        return fit()


def _same_release(a: CDPFairClassifier, b: CDPFairClassifier, rows: Any) -> None:
    """Equal released numbers, predictions and guarantee."""
    assert a.privacy_spent_ == b.privacy_spent_
    assert a.path_privacy_spent_ == b.path_privacy_spent_
    assert _ledger(a) == _ledger(b)
    assert a.bandwidth_ == b.bandwidth_ and a.tie_seed_ == b.tie_seed_
    np.testing.assert_array_equal(a.tau_, b.tau_)
    np.testing.assert_array_equal(a.pi_, b.pi_)
    for fa, fb in zip(a.folds_, b.folds_, strict=True):
        np.testing.assert_array_equal(fa.eta, fb.eta)
    assert a.certified_ == b.certified_
    np.testing.assert_array_equal(a.predict(rows.X, sensitive_features=rows.A),
                                  b.predict(rows.X, sensitive_features=rows.A))
    np.testing.assert_array_equal(a.predict_proba(rows.X, sensitive_features=rows.A),
                                  b.predict_proba(rows.X, sensitive_features=rows.A))


@pytest.mark.parametrize("kw", [dict(), dict(cross_fit=True), dict(threshold_rule="target")],
                         ids=["certified", "cross-fit", "target"])
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_memory_and_file_give_the_same_release(data, test_rows, files, fmt, kw) -> None:
    est = _estimator(data, **kw)
    mem = _quiet(lambda: clone(est).fit(data.X, data.y, sensitive_features=data.A))
    ooc = _quiet(lambda: fit_cdp_fair_from_file(files[fmt], clone(est), features=FEATURES,
                                                target="y", sensitive="a"))
    _same_release(mem, ooc, test_rows)
    assert ooc.outofcore_.n == data.n
    assert sum(ooc.outofcore_.half_sizes) == data.n


def test_session_forced_onto_aggregates_gives_the_same_release(data, test_rows, files) -> None:
    s = Session(files["parquet"], budget=Budget.approx(2.0, 1e-5), reproducible_seed=5)
    clf = _quiet(lambda: s.fit_fair_classifier(
        features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
        aggregate="always", **SETTINGS))
    assert s.records[-1].params["aggregated"] is True
    assert s.records[-1].cost == clf.privacy_spent_
    # A session clamps features to the box (clip=True); the data lie inside it anyway.
    mem = _quiet(lambda: _estimator(data, clip=True, random_state=_session_stream(5)).fit(
        data.X, data.y, sensitive_features=data.A))
    _same_release(mem, clf, test_rows)


def test_dask_gives_the_same_release(data, test_rows, frame) -> None:
    pytest.importorskip("dask", reason="the [dask] extra is not installed")
    ddf = pytest.importorskip("dask.dataframe")
    import dask

    with dask.config.set(scheduler="synchronous"):
        s = Session(ddf.from_pandas(frame, npartitions=3), budget=Budget.approx(2.0, 1e-5),
                    reproducible_seed=5)
        clf = _quiet(lambda: s.fit_fair_classifier(
            features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
            cross_fit=True, **SETTINGS))
    assert s.records[-1].params["aggregated"] is True
    mem = _quiet(lambda: _estimator(data, clip=True, cross_fit=True,
                                    random_state=_session_stream(5)).fit(
        data.X, data.y, sensitive_features=data.A))
    _same_release(mem, clf, test_rows)


def test_in_memory_default_split_is_the_permutation(data, test_rows) -> None:
    """split=None keeps the in-memory permutation split (exact halves); "position" differs."""
    def fit(**kw: Any) -> CDPFairClassifier:
        est = CDPFairClassifier(**SETTINGS, feature_bounds=data.feature_bounds,
                                threshold_rule="target", random_state=5, **kw)
        return _quiet(lambda: est.fit(data.X, data.y, sensitive_features=data.A))

    default, perm, pos = fit(), fit(split="permutation"), fit(split="position")
    _same_release(default, perm, test_rows)
    assert not np.array_equal(default.pi_, pos.pi_)


def test_file_refuses_permutation_and_linear(data, files) -> None:
    with pytest.raises(InvalidParameterError, match="split='permutation'"):
        fit_cdp_fair_from_file(files["parquet"], _estimator(data).set_params(
            split="permutation"), features=FEATURES, target="y", sensitive="a")
    with pytest.raises(InvalidParameterError, match="estimator='linear'"):
        fit_cdp_fair_from_file(files["parquet"], _estimator(data).set_params(
            estimator="linear"), features=FEATURES, target="y", sensitive="a")
    with pytest.raises(InvalidParameterError, match="split="):
        _estimator(data).set_params(split="rows").fit(data.X, data.y, sensitive_features=data.A)
    with pytest.raises(InvalidParameterError, match="set these on the estimator"):
        fit_cdp_fair_from_file(files["parquet"], _estimator(data), features=FEATURES,
                               target="y", sensitive="a", epsilon=2.0)


def test_keyword_form_still_works_and_is_deprecated(data, test_rows, files) -> None:
    with pytest.warns(DeprecationWarning, match="keyword form is deprecated"):
        old = _quiet(lambda: fit_cdp_fair_from_file(
            files["parquet"], features=FEATURES, target="y", sensitive="a",
            feature_bounds=data.feature_bounds, random_state=5, **SETTINGS))
    new = _quiet(lambda: fit_cdp_fair_from_file(
        files["parquet"], _estimator(data, cross_fit=False), features=FEATURES, target="y",
        sensitive="a"))
    _same_release(old, new, test_rows)


@pytest.mark.parametrize("kind", ["permutation", "position"])
def test_attack_split_does_not_depend_on_the_data(data, kind) -> None:
    """Attacker: replace one record (features, group and label) and look for a change in the
    halves the pipeline reads. The split is drawn from (n, seed) alone, so a neighbour gets
    the same halves and the replaced record stays in its half: parallel composition over the
    halves stands."""
    from dpfair.fairclass._pipeline import ArraySource
    from dpfair.fairclass._split import draw_split

    U2, A2, y2 = data.X.copy(), data.A.copy(), data.y.copy()
    U2[17], A2[17], y2[17] = (0.0, 1.0), 1 - A2[17], 1 - y2[17]
    sources = (ArraySource(data.X, data.A, data.y), ArraySource(U2, A2, y2))
    seen = []
    for src in sources:
        split = draw_split(kind, np.random.default_rng(3), src.n_rows())
        src.check_halves(split)
        seen.append([src.rows(split, h)[1] for h in (0, 1)])  # the groups each half holds
        assert split.labels(17, 1)[0] == draw_split(
            kind, np.random.default_rng(3), src.n_rows()).labels(17, 1)[0]
    for h in (0, 1):
        differ = np.flatnonzero(seen[0][h] != seen[1][h])
        assert differ.size <= 1  # only the replaced record's own entry can differ

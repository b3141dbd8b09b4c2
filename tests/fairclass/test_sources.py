"""One CDP-Fair pipeline, three sources: the same seed gives the same release.

Through the public API only: :class:`~dpfair.fairclass.CDPFairClassifier` on arrays (with
``split="position"``, the split the out-of-core sources use), the same configured estimator
on a Parquet/CSV file through :func:`~dpfair.fairclass.fit_cdp_fair_from_file` and through a
:class:`~dpfair.Session` forced onto DuckDB aggregates (``aggregate="always"``), and a Dask
DataFrame through a Session (skipped without the ``[dask]`` extra). Same predictions, same
released numbers, same ``privacy_spent_`` and ledger records — under demographic parity and
under equal opportunity (whose S2 streams the positive-label rows once its noisy counts are
drawn).
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
CONSTRAINTS = ["demographic_parity", "equal_opportunity"]


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
    assert a.constraints_ == b.constraints_
    for fa, fb in zip(a.folds_, b.folds_, strict=True):
        np.testing.assert_array_equal(fa.eta, fb.eta)
        if a.constraints_ == "equal_opportunity":  # the released p̃_{a,1} of S2
            np.testing.assert_array_equal(fa.positive, fb.positive)
    assert a.certified_ == b.certified_
    assert a.certificates_ == b.certificates_
    np.testing.assert_array_equal(a.predict(rows.X, sensitive_features=rows.A),
                                  b.predict(rows.X, sensitive_features=rows.A))
    np.testing.assert_array_equal(a.predict_proba(rows.X, sensitive_features=rows.A),
                                  b.predict_proba(rows.X, sensitive_features=rows.A))


@pytest.mark.parametrize("kw", [dict(), dict(cross_fit=True), dict(threshold_rule="target"),
                                dict(calibration_share=0.7)],
                         ids=["certified", "cross-fit", "target", "share-0.7"])
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("constraints", CONSTRAINTS)
def test_memory_and_file_give_the_same_release(data, test_rows, files, fmt, kw,
                                               constraints) -> None:
    est = _estimator(data, constraints=constraints, **kw)
    mem = _quiet(lambda: clone(est).fit(data.X, data.y, sensitive_features=data.A))
    ooc = _quiet(lambda: fit_cdp_fair_from_file(files[fmt], clone(est), features=FEATURES,
                                                target="y", sensitive="a"))
    _same_release(mem, ooc, test_rows)
    assert ooc.outofcore_.n == data.n
    assert sum(ooc.outofcore_.half_sizes) == data.n
    if constraints == "equal_opportunity":  # the positive-label counts, charged as in memory
        labels = [r[0] for r in _ledger(ooc)]
        assert sum("positive-label counts" in lab for lab in labels) == len(ooc.folds_)


@pytest.mark.parametrize("constraints", CONSTRAINTS)
def test_session_forced_onto_aggregates_gives_the_same_release(data, test_rows, files,
                                                               constraints) -> None:
    s = Session(files["parquet"], budget=Budget.approx(2.0, 1e-5), reproducible_seed=5)
    clf = _quiet(lambda: s.fit_fair_classifier(
        features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
        aggregate="always", constraints=constraints, **SETTINGS))
    assert s.records[-1].params["aggregated"] is True
    assert s.records[-1].cost == clf.privacy_spent_
    # A session clamps features to the box (clip=True); the data lie inside it anyway.
    mem = _quiet(lambda: _estimator(data, clip=True, random_state=_session_stream(5),
                                    constraints=constraints).fit(
        data.X, data.y, sensitive_features=data.A))
    _same_release(mem, clf, test_rows)


def test_session_on_aggregates_takes_a_calibration_share(data, test_rows, files) -> None:
    """calibration_share reaches the out-of-core split: the position hash puts each row in
    the calibration half with probability c, the same rows as the in-memory position split."""
    s = Session(files["parquet"], budget=Budget.approx(2.0, 1e-5), reproducible_seed=5)
    clf = _quiet(lambda: s.fit_fair_classifier(
        features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
        aggregate="always", calibration_share=0.7, **SETTINGS))
    assert s.records[-1].params["aggregated"] is True
    assert s.records[-1].params["calibration_share"] == 0.7
    train, cal = clf.outofcore_.half_sizes
    assert train + cal == data.n
    # Bin(4000, 0.7): |cal - 2800| > 200 has probability < 1e-10 (Hoeffding: 2·e^{-2·200²/4000})
    assert abs(cal - 0.7 * data.n) < 200
    mem = _quiet(lambda: _estimator(data, clip=True, random_state=_session_stream(5),
                                    calibration_share=0.7).fit(
        data.X, data.y, sensitive_features=data.A))
    _same_release(mem, clf, test_rows)


@pytest.mark.parametrize("constraints", CONSTRAINTS)
def test_dask_gives_the_same_release(data, test_rows, frame, constraints) -> None:
    pytest.importorskip("dask", reason="the [dask] extra is not installed")
    ddf = pytest.importorskip("dask.dataframe")
    import dask

    with dask.config.set(scheduler="synchronous"):
        s = Session(ddf.from_pandas(frame, npartitions=3), budget=Budget.approx(2.0, 1e-5),
                    reproducible_seed=5)
        clf = _quiet(lambda: s.fit_fair_classifier(
            features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
            cross_fit=True, constraints=constraints, **SETTINGS))
    assert s.records[-1].params["aggregated"] is True
    mem = _quiet(lambda: _estimator(data, clip=True, cross_fit=True, constraints=constraints,
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


# ------------------------------------------------------------------ equal opportunity
def test_equal_opportunity_certified_fit_is_the_same_from_a_file(data, test_rows, files) -> None:
    """A fit that certifies (ε = 4, α = 0.3): the certificate's check, drawn after the
    streamed pass over the positive-label rows, is the in-memory one."""
    est = CDPFairClassifier(epsilon=4.0, delta=1e-6, alpha=0.3, split="position",
                            feature_bounds=data.feature_bounds, random_state=3,
                            constraints="equal_opportunity")
    mem = clone(est).fit(data.X, data.y, sensitive_features=data.A)
    for fmt in ("parquet", "csv"):
        ooc = fit_cdp_fair_from_file(files[fmt], clone(est), features=FEATURES, target="y",
                                     sensitive="a")
        assert ooc.certified_ is True
        _same_release(mem, ooc, test_rows)


def test_equal_opportunity_raise_charges_the_same_as_memory(data, files) -> None:
    """on_uncertified="raise": nothing is returned, and the file path reports the same
    spend, certificates and message as the in-memory fit; a Session forced onto
    aggregates charges what a Session in memory charges."""
    from dpfair.fairclass import UncertifiedFairnessError

    est = _estimator(data, constraints="equal_opportunity", on_uncertified="raise")
    errs = []
    with pytest.raises(UncertifiedFairnessError) as mem_err:
        clone(est).fit(data.X, data.y, sensitive_features=data.A)
    errs.append(mem_err.value)
    for fmt in ("parquet", "csv"):
        with pytest.raises(UncertifiedFairnessError) as ooc_err:
            fit_cdp_fair_from_file(files[fmt], clone(est), features=FEATURES, target="y",
                                   sensitive="a")
        errs.append(ooc_err.value)
    for e in errs[1:]:
        assert e.privacy_spent == errs[0].privacy_spent
        assert e.certificates == errs[0].certificates
        assert str(e) == str(errs[0])
    spent = []
    for agg in ("always", "never"):
        s = Session(files["parquet"], budget=Budget.approx(2.0, 1e-5), reproducible_seed=5)
        with pytest.raises(UncertifiedFairnessError):
            _quiet(lambda s=s, agg=agg: s.fit_fair_classifier(
                features=FEATURES, target="y", sensitive="a",
                feature_bounds=data.feature_bounds, aggregate=agg,
                constraints="equal_opportunity", on_uncertified="raise", **SETTINGS))
        assert len(s.records) == 1
        spent.append((s.spent, s.records[-1].cost))
    assert spent[0] == spent[1]
    assert spent[0][0].epsilon == pytest.approx(SETTINGS["epsilon"])


def _eo_statistics(path: Path, data: Any, grid: Any, fold: Any,
                   positive: np.ndarray) -> tuple[Any, ...]:
    """The EO aggregate statistics of the file path: the (half, group, label) counts and
    the calibration half's rounded-score histogram of its positive-label rows at a fixed p̃."""
    from dpfair.data.fairclass_sql import connect
    from dpfair.fairclass._split import draw_split
    from dpfair.fairclass.outofcore import _ParquetAggregates, validate_request

    est = _estimator(data, constraints="equal_opportunity")
    req = validate_request(est, features=FEATURES, target="y", sensitive="a")
    with connect() as con:
        src = _ParquetAggregates(con, path, path.name, req, memory_limit="1GB", threads=None,
                                 batch_size=257, path=path, converted=False)
        split = draw_split("position", np.random.default_rng(5), src.n_rows())
        cals, counts = src.opportunity_calibrations(grid, split, {1: fold})
        return counts, cals[1].histogram(positive), cals[1].positive_counts()


@pytest.mark.parametrize("flip", ["label", "group", "both"])
def test_attack_a_flipped_record_moves_the_eo_statistics_by_the_sensitivity(
    data, frame, tmp_path, flip
) -> None:
    """Attacker: a neighbour file differing in one calibration record (its label flips
    1 -> 0, its group flips, or both). Through the file path's own queries, exact integers:

    * the positive-label counts (n_{0,1}, n_{1,1}) move by L1 <= 2 (the noisy counts'
      stated sensitivity; 1 for a label flip);
    * at any fixed released p̃ the histogram of the positive rows' rounded scores moves by
      one row in at most one bin per group (so every tail count by <= 1: EOD̂'s
      sensitivity 1/m̃₁ + 1/m̃₀), and by nothing else.
    """
    from dpfair.fairclass._split import draw_split

    fitted = _quiet(lambda: _estimator(data).fit(data.X, data.y, sensitive_features=data.A))
    grid, fold = fitted.grid_, fitted.folds_[0]
    base_path = tmp_path / "base.parquet"
    frame.to_parquet(base_path, index=False)
    split = draw_split("position", np.random.default_rng(5), data.n)
    cal = np.flatnonzero(split.labels(0, data.n) == 1)
    i = int(cal[np.flatnonzero(data.y[cal] == 1)[0]])
    other = frame.copy()
    if flip in ("label", "both"):
        other.loc[i, "y"] = 0
    if flip in ("group", "both"):
        other.loc[i, "a"] = 1 - int(other.loc[i, "a"])
    nb_path = tmp_path / "neighbour.parquet"
    other.to_parquet(nb_path, index=False)
    positive = np.array([0.6, 0.1])
    c0, h0, p0 = _eo_statistics(base_path, data, grid, fold, positive)
    c1, h1, p1 = _eo_statistics(nb_path, data, grid, fold, positive)
    dn = np.abs(np.subtract(p1, p0))
    assert int(dn.sum()) == {"label": 1, "group": 2, "both": 1}[flip]
    assert int(np.abs(c1 - c0).sum()) == 2  # one row leaves a cell, enters another
    assert c1.sum() == c0.sum()  # n_C public
    diff = h1 - h0
    per_group = np.abs(diff).sum(axis=1)
    assert np.all(per_group <= 1)  # at most one row leaves/enters each group's histogram
    assert int(per_group.sum()) == {"label": 1, "group": 2, "both": 1}[flip]
    # the tails #{Z >= τ} (group 1) and #{Z <= τ} (group 0) move by at most 1 at every τ
    assert np.abs(np.cumsum(diff[1][::-1])).max() <= 1
    assert np.abs(np.cumsum(diff[0])).max() <= 1


def test_equal_opportunity_data_error_charges_the_same_as_memory(data, frame, tmp_path) -> None:
    """A fit that fails on the data after reading it (a feature outside its public box,
    clip=False): the Session charges the planned budget on the aggregate path exactly as
    in memory, and reports no detail of the row."""
    bad = frame.copy()
    bad.loc[int(np.flatnonzero(data.y == 1)[-1]), "x1"] = 5.0  # far outside the box
    path = tmp_path / "bad.parquet"
    bad.to_parquet(path, index=False)
    charged = []
    for agg in ("always", "never"):
        s = Session(path, budget=Budget.approx(2.0, 1e-5), reproducible_seed=5)
        with pytest.raises(Exception) as info:
            _quiet(lambda s=s, agg=agg: s.fit_fair_classifier(
                features=FEATURES, target="y", sensitive="a",
                feature_bounds=data.feature_bounds, aggregate=agg, clip=False,
                constraints="equal_opportunity", **SETTINGS))
        assert "5.0" not in str(info.value)
        assert len(s.records) == 1
        charged.append((s.spent, s.records[-1].cost))
    assert charged[0] == charged[1]
    assert charged[0][0].epsilon == pytest.approx(SETTINGS["epsilon"])


def test_dask_eo_statistics_equal_the_file_ones(data, frame, files) -> None:
    """The Dask source's equal-opportunity aggregates (its own per-partition tasks) are the
    file path's exact integers: the (half, group, label) counts and, at a fixed p̃, the
    rounded-score histogram of the positive-label rows — so the attacker's bound above
    holds for both."""
    pytest.importorskip("dask", reason="the [dask] extra is not installed")
    ddf = pytest.importorskip("dask.dataframe")
    import dask

    from dpfair.fairclass._split import draw_split
    from dpfair.fairclass.outofcore import validate_request
    from dpfair.session._dask_fair import DaskAggregates

    fitted = _quiet(lambda: _estimator(data).fit(data.X, data.y, sensitive_features=data.A))
    grid, fold = fitted.grid_, fitted.folds_[0]
    positive = np.array([0.6, 0.1])
    c_file, h_file, p_file = _eo_statistics(files["parquet"], data, grid, fold, positive)
    req = validate_request(_estimator(data, constraints="equal_opportunity"),
                           features=FEATURES, target="y", sensitive="a")
    with dask.config.set(scheduler="synchronous"):
        src = DaskAggregates(ddf.from_pandas(frame, npartitions=4), FEATURES, "y", "a", req)
        split = draw_split("position", np.random.default_rng(5), src.n_rows())
        cals, c_dask = src.opportunity_calibrations(grid, split, {1: fold})
        h_dask = cals[1].histogram(positive)
    np.testing.assert_array_equal(c_dask, c_file)
    np.testing.assert_array_equal(h_dask, h_file)
    assert cals[1].positive_counts() == p_file

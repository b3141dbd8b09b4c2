"""CDP-Fair from a file (DuckDB aggregates + streamed scores) against the in-memory fit.

What is equal, precisely. The out-of-core split is a seeded hash of the row position, not
the in-memory permutation, so the two *fits* differ. Given the same split (the S1 rows) and
the generator in the same state, the S1 release (η̃ on the grid, π̃) equals ``release_s1``
on those rows up to the rounding of the aggregated weights (rtol 1e-9), and τ̂ equals
``private_fair_threshold`` on the calibration scores rounded to the 2/B lattice *exactly*.
Against the in-memory fit on the same data only the quality is compared (tolerances below).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from dpfair import InvalidDataError, InvalidParameterError
from dpfair.cli.fairclass import register
from dpfair.fairclass import CDPFairClassifier, fit_cdp_fair_from_file
from dpfair.fairclass._split import MERSENNE_61, PositionSplit, draw_split
from dpfair.fairclass._threshold import (
    dd_steps,
    dd_steps_from_counts,
)
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.metrics import demographic_disparity, misclassification_error
from dpfair.fairclass.outofcore import ScoreHistogram

FEATURES = ["x1", "x2"]
EPS, DELTA, ALPHA = 1.0, 1e-6, 0.1


def _table(X, A, y) -> pa.Table:
    return pa.table({"x1": X[:, 0], "x2": X[:, 1], "grp": np.asarray(A, dtype=np.int64),
                     "label": np.asarray(y, dtype=np.int64)})


def _write(path: Path, table: pa.Table) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=1500)  # several row groups
    else:
        pcsv.write_csv(table, path)
    return path


_FILE_OPTIONS = ("score_bins", "batch_size", "memory_limit", "threads", "tmp_dir")


def _fit(path: Path, bounds, **kw):
    file_kw = {k: kw.pop(k) for k in _FILE_OPTIONS if k in kw}
    cols = dict(features=kw.pop("features", FEATURES), target=kw.pop("target", "label"),
                sensitive=kw.pop("sensitive", "grp"))
    params = dict(feature_bounds=bounds, epsilon=EPS, delta=DELTA, alpha=ALPHA, random_state=7,
                  cross_fit=False)
    params.update(kw)
    return fit_cdp_fair_from_file(path, CDPFairClassifier(**params), **cols, **file_kw)


@pytest.fixture(scope="module")
def sim():
    return simulate(6000, rng=3)


@pytest.fixture(scope="module")
def files(sim, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ooc")
    t = _table(sim.X, sim.A, sim.y)
    return {fmt: _write(folder / f"train.{fmt}", t) for fmt in ("parquet", "csv")}


# ----------------------------------------------------------------------------- the split
def test_position_split_sql_equals_python_reference_and_is_balanced() -> None:
    split = PositionSplit.from_rng(np.random.default_rng(0))
    halves = split.halves(100_000)
    for i in [0, 1, 2, 3, 17, 999, 65_536, 99_999]:
        assert halves[i] == split.half_of(i)
    assert split.half_sizes(100_000) == (int(np.sum(halves == 0)), int(np.sum(halves == 1)))
    assert abs(int(np.sum(halves == 0)) - 50_000) < 5 * np.sqrt(25_000)
    # Data-independent and prefix-stable: the half of position i never depends on n.
    assert np.array_equal(split.halves(1000), halves[:1000])
    assert all(0 <= c < MERSENNE_61 for c in split.coefficients)


@pytest.mark.parametrize("share", [0.3, 0.7, 0.9])
def test_position_split_with_a_share_puts_that_share_in_the_calibration_half(share) -> None:
    """The hash cut ⌊(1 − c)·p⌋: SQL equals the Python reference, the same coefficients
    (one rng.integers call whatever the share), and the calibration half holds a share c
    of the positions (4-wise independent coins: Chebyshev on the count, variance n·c(1−c),
    a deviation over 1000 sd has probability < 1e-6)."""
    from dpfair.fairclass._split import position_cut

    split = PositionSplit.from_rng(np.random.default_rng(0), share)
    assert split.coefficients == PositionSplit.from_rng(np.random.default_rng(0)).coefficients
    assert split.cut == position_cut(share)
    halves = split.halves(100_000)
    for i in [0, 1, 2, 3, 17, 999, 65_536, 99_999]:
        assert halves[i] == split.half_of(i)
    assert split.half_sizes(100_000) == (int(np.sum(halves == 0)), int(np.sum(halves == 1)))
    sd = np.sqrt(100_000 * share * (1 - share))
    assert abs(int(np.sum(halves == 1)) - share * 100_000) < 1000 * sd / 100  # 10 sd
    # a larger share moves rows only from training to calibration (nested halves)
    if share < 0.9:
        more = PositionSplit.from_rng(np.random.default_rng(0), 0.9).halves(100_000)
        assert np.all(more[halves == 1] == 1)


def test_position_cut_of_a_half_is_the_old_cut() -> None:
    from dpfair.fairclass._split import position_cut

    assert position_cut(0.5) == (MERSENNE_61 - 1) // 2
    with pytest.raises(Exception, match="calibration_share"):
        position_cut(1.0)


def test_both_splits_share_one_interface() -> None:
    """rows, labels and half_sizes agree for both splits; neither looks at the data."""
    for split in (draw_split("permutation", np.random.default_rng(4), 1001),
                  draw_split("position", np.random.default_rng(4), 1001)):
        r0, r1 = split.rows(1001)
        labels = split.labels(0, 1001)
        assert split.half_sizes(1001) == (r0.size, r1.size)
        assert np.array_equal(np.flatnonzero(labels == 0), r0)
        assert np.array_equal(split.labels(100, 50), labels[100:150])
    assert draw_split("permutation", np.random.default_rng(4), 1001).half_sizes(1001) == (500, 501)
    with pytest.raises(InvalidParameterError, match="split="):
        draw_split("rows", np.random.default_rng(0), 10)


def test_binned_steps_equal_dd_steps_of_repeated_values() -> None:
    rng = np.random.default_rng(1)
    bins = 64
    k1 = ScoreHistogram.round_scores(rng.uniform(-0.6, 0.6, 300), bins)
    k0 = ScoreHistogram.round_scores(rng.uniform(-0.6, 0.6, 200), bins)
    h = ScoreHistogram(bins, np.vstack([np.bincount(k0, minlength=bins + 1),
                                        np.bincount(k1, minlength=bins + 1)]))
    v = h.values
    assert v[bins // 2] == 0.0 and v[0] == -1.0 and v[-1] == 1.0
    for m in [(None, None), (310.5, 189.5)]:
        a = dd_steps_from_counts(v, h.counts[1], h.counts[0], *m)
        b = dd_steps(v[k1], v[k0], *m)
        assert np.array_equal(a.breaks, b.breaks)
        assert np.array_equal(a.gap, b.gap) and np.array_equal(a.atom, b.atom)


# ----------------------------------------------------------------------------- equality
# The same seed gives the same release in memory, from a file and from Dask: through the
# public API in tests/fairclass/test_sources.py (it replaces a replay of the pipeline from
# private internals that stood here).


def test_csv_and_parquet_give_the_same_model(sim, files) -> None:
    a = _fit(files["parquet"], sim.feature_bounds, cross_fit=True)
    b = _fit(files["csv"], sim.feature_bounds, cross_fit=True)
    assert a.outofcore_.half_sizes == b.outofcore_.half_sizes
    for fa, fb in zip(a.folds_, b.folds_, strict=True):
        np.testing.assert_allclose(fa.eta, fb.eta, rtol=1e-9, atol=1e-12)
        assert fa.tau == pytest.approx(fb.tau, abs=1e-9)


def test_batch_size_does_not_change_the_fit(sim, files) -> None:
    """Bitwise with one DuckDB thread (parallel GROUP BY sums in varying order: ~1e-16)."""
    a = _fit(files["parquet"], sim.feature_bounds, cross_fit=True, threads=1)
    b = _fit(files["parquet"], sim.feature_bounds, cross_fit=True, threads=1, batch_size=257)
    assert np.array_equal(a.tau_, b.tau_)
    for fa, fb in zip(a.folds_, b.folds_, strict=True):
        assert np.array_equal(fa.eta, fb.eta)
    c = _fit(files["parquet"], sim.feature_bounds, cross_fit=True)  # default threads
    for fa, fc in zip(a.folds_, c.folds_, strict=True):
        np.testing.assert_allclose(fa.eta, fc.eta, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cross_fit", [False, True])
def test_predictions_deterministic_and_privacy_as_requested(sim, files, cross_fit) -> None:
    clf = _fit(files["parquet"], sim.feature_bounds, cross_fit=cross_fit)
    assert isinstance(clf, CDPFairClassifier)
    assert len(clf.folds_) == (2 if cross_fit else 1)
    assert clf.privacy_spent_.epsilon == pytest.approx(EPS, rel=1e-9)
    assert clf.privacy_spent_.epsilon <= EPS * (1 + 1e-12)
    assert clf.privacy_spent_.delta == pytest.approx(DELTA)
    test = simulate(3000, rng=11)
    p1 = clf.predict(test.X, sensitive_features=test.A)
    p2 = clf.predict(test.X, sensitive_features=test.A)
    assert np.array_equal(p1, p2)
    again = _fit(files["parquet"], sim.feature_bounds, cross_fit=cross_fit)
    assert np.array_equal(again.predict(test.X, sensitive_features=test.A), p1)
    proba = clf.predict_proba(test.X, sensitive_features=test.A)
    assert proba.shape == (3000, 2) and np.allclose(proba.sum(axis=1), 1.0)
    exported = clf.export_released_model()
    assert exported["estimator"] == "CDPFairClassifier"
    json.dumps(exported)


def test_quality_close_to_in_memory_fit(tmp_path: Path) -> None:
    """Mean over 4 seeds: |error difference| ≤ 0.02 and ||DD| difference| ≤ 0.04.

    Both fits are noisy; the tolerances are ~3 standard errors of the mean difference
    observed for this design (n = 40 000, ε = 1).
    """
    data = simulate(40_000, rng=21)
    test = simulate(40_000, rng=22)
    path = _write(tmp_path / "big.parquet", _table(data.X, data.A, data.y))
    errs, dds = [], []
    for seed in range(4):
        ooc = _fit(path, data.feature_bounds, random_state=seed, cross_fit=True)
        mem = CDPFairClassifier(epsilon=EPS, delta=DELTA, alpha=ALPHA, cross_fit=True,
                                feature_bounds=data.feature_bounds, random_state=seed).fit(
            data.X, data.y, sensitive_features=data.A)
        row = []
        for clf in (ooc, mem):
            p = clf.predict_proba(test.X, sensitive_features=test.A)[:, 1]
            row.append((misclassification_error(test.y, p),
                        abs(demographic_disparity(p, test.A))))
        errs.append(row[0][0] - row[1][0])
        dds.append(row[0][1] - row[1][1])
    assert abs(np.mean(errs)) <= 0.02
    assert abs(np.mean(dds)) <= 0.04


def test_out_of_core_certified_rule_by_default(sim, files) -> None:
    """The out-of-core fit runs the certified rule like ``fit``: check charged, verdict set."""
    import warnings

    from dpfair import UncertifiedFairnessWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf = _fit(files["parquet"], sim.feature_bounds)
    assert isinstance(clf.certified_, bool) and len(clf.certificates_) == 1
    cert = clf.certificates_[0]
    assert cert.certified == (abs(cert.released_dd) <= cert.alpha - cert.margin)
    assert any("certificate" in r.label for r in clf.privacy_ledger_.records)
    assert clf.privacy_spent_.epsilon == pytest.approx(EPS)


# ----------------------------------------------------------------------------- errors
def _bad_file(tmp_path: Path, fmt: str, mutate) -> Path:
    data = simulate(400, rng=5)
    cols = {"x1": data.X[:, 0].astype(object), "x2": data.X[:, 1].astype(object),
            "grp": data.A.astype(object), "label": data.y.astype(object)}
    mutate(cols)
    t = pa.table({k: pa.array(list(v), type=pa.float64()) for k, v in cols.items()})
    return _write(tmp_path / f"bad.{fmt}", t)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["x1"].__setitem__(slice(10, 13), None), r"3 row\(s\) with NULL"),
        (lambda c: c["x2"].__setitem__(5, float("nan")), "NULL/NaN/infinite"),
        (lambda c: c["x1"].__setitem__(7, 1.5), "outside its public bounds"),
        (lambda c: c["label"].__setitem__(3, 2.0), "is not 0/1"),
        (lambda c: c["grp"].__setitem__(390, 0.5), "is not 0/1"),
        (lambda c: c["grp"].__setitem__(0, None), "NULL"),
    ],
)
def test_bad_values_are_errors(tmp_path: Path, fmt, mutate, message) -> None:
    path = _bad_file(tmp_path, fmt, mutate)
    with pytest.raises(InvalidDataError, match=message):
        _fit(path, ((0.0, 1.0), (0.0, 1.0)))


def test_clip_accepts_out_of_bounds(tmp_path: Path) -> None:
    path = _bad_file(tmp_path, "parquet", lambda c: c["x1"].__setitem__(7, 1.5))
    clf = _fit(path, ((0.0, 1.0), (0.0, 1.0)), clip=True)
    assert clf.outofcore_.n == 400


def test_missing_and_non_numeric_columns(tmp_path: Path, sim, files) -> None:
    with pytest.raises(InvalidParameterError, match="'nope'"):
        _fit(files["parquet"], sim.feature_bounds, target="nope")
    t = pa.table({"x1": ["a"] * 50, "x2": np.zeros(50), "grp": np.zeros(50),
                  "label": np.zeros(50)})
    path = _write(tmp_path / "str.parquet", t)
    with pytest.raises(InvalidDataError, match="numeric"):
        _fit(path, sim.feature_bounds)
    with pytest.raises(InvalidParameterError, match="score_bins"):
        _fit(files["parquet"], sim.feature_bounds, score_bins=1000)
    with pytest.raises(InvalidParameterError, match="no such file"):
        _fit(tmp_path / "absent.parquet", sim.feature_bounds)


def test_tiny_group_is_refused(tmp_path: Path) -> None:
    def one_group(c):
        c["grp"][:] = 0
        c["grp"][:5] = 1

    path = _bad_file(tmp_path, "parquet", one_group)
    with pytest.raises(Exception, match="group 1 has only 5"):
        _fit(path, ((0.0, 1.0), (0.0, 1.0)))


# ----------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def app():
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """dpfair (test harness)."""

    register(app)
    return app


def _cli(app, train: Path, test: Path, *extra: str):
    args = ["fair-classify", str(train), str(test), "--target", "label", "--sensitive", "grp",
            "--features", "x1", "x2", "--bounds", "0", "1", "0", "1", "--epsilon", "1",
            "--delta", "1e-6", "--alpha", "0.1", "--seed", "3", "--json", *extra]
    return CliRunner().invoke(app, args)


def test_cli_aggregate_flag(app, sim, files, tmp_path: Path) -> None:
    test = simulate(2000, rng=9)
    test_path = _write(tmp_path / "test.parquet", _table(test.X, test.A, test.y))
    res = _cli(app, files["parquet"], test_path, "--aggregate", "always", "--no-cross-fit")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["aggregated"] is True and out["n_train"] == sim.n
    assert out["score_resolution"] == 2.0**-15
    assert out["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    # --seed 3 opens the CLI's session for reproduction: its release 0 draws stream 0
    stream = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(0,)))
    direct = _fit(files["parquet"], sim.feature_bounds, random_state=stream, cross_fit=False)
    assert out["tau"] == pytest.approx(direct.tau_.tolist(), abs=0)
    pred = direct.predict(test.X, sensitive_features=test.A)
    assert out["test_error"] == pytest.approx(misclassification_error(test.y, pred))

    small = _cli(app, files["csv"], test_path, "--aggregate", "auto")  # small: in memory
    assert small.exit_code == 0, small.output
    assert json.loads(small.stdout)["aggregated"] is False
    never = _cli(app, files["csv"], test_path, "--aggregate", "never")
    assert json.loads(never.stdout)["tau"] == json.loads(small.stdout)["tau"]

    bad = _cli(app, files["csv"], test_path, "--aggregate", "sometimes")
    assert bad.exit_code == 2
    assert "--aggregate" in bad.output

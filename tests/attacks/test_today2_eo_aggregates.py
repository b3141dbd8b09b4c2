"""Attacks on CDP-Fair equal opportunity from aggregates (files, Session, CLI).

Adversary (THREATS.md, analyst row): picks the data file and every parameter, runs any
command any number of times, reads every released double and every error. Claims under
attack (``fairclass/outofcore.py``, ``data/fairclass_sql.py``,
``docs/proofs/equal_opportunity.md`` §4a):

* the aggregate path validates and refuses exactly what memory refuses — including rows
  S2 under equal opportunity never scores (label 0 of the calibration half), which the
  positive-only streamed pass does not read;
* a failure inside the extra streamed pass (a signal, a changed file) is charged the
  planned cost, with no count in the message;
* the streamed histogram gives S2 the in-memory step function and the same released τ̂,
  p̃ and certificate, bit for bit, with scores on lattice edges, on half-lattice ties, at
  −0.0 (group 0 with η̃ = 1/2 gives z = −0.0 in memory, index B/2 = +0.0 from a file) and
  clipped at ±1;
* the same command run twice charges twice, and a third run over the cap is refused
  before reading and charges nothing.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from typer.testing import CliRunner

from dpfair import InvalidDataError, Session, UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, fit_cdp_fair_from_file
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._opportunity import OpportunityCalibration, s2_opportunity
from dpfair.fairclass._threshold import SCORE_LATTICE_BINS, snap_scores
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.outofcore import PositiveScoreHistogram, positive_score_counts
from dpfair.privacy import Budget
from dpfair.session import ReproducibleSeedWarning

FEATURES = ["x1", "x2"]
SETTINGS = dict(epsilon=1.0, delta=1e-6, alpha=0.15)


@pytest.fixture(scope="module")
def data() -> Any:
    return simulate(4000, rng=31)


@pytest.fixture(scope="module")
def frame(data: Any) -> pd.DataFrame:
    return pd.DataFrame({"x1": data.X[:, 0], "x2": data.X[:, 1],
                         "y": data.y.astype(np.int64), "a": data.A.astype(np.int64)})


@pytest.fixture(scope="module")
def parquet(frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("eo2") / "train.parquet"
    frame.to_parquet(p, index=False)
    return p


def _quiet(fit: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        warnings.simplefilter("ignore", ReproducibleSeedWarning)
        return fit()


def _estimator(data: Any, **kw: Any) -> CDPFairClassifier:
    kw.setdefault("random_state", 5)
    kw.setdefault("cross_fit", False)
    return CDPFairClassifier(**SETTINGS, feature_bounds=data.feature_bounds, split="position",
                             constraints="equal_opportunity", **kw)


# ------------------------------------------------------------------ validation: same refusals
@pytest.mark.parametrize("bad", [np.nan, 50.0], ids=["nan", "outside-box"])
def test_today2_label0_calibration_row_is_refused_from_a_file_as_in_memory(
        data, frame, tmp_path, bad) -> None:
    """A label-0 row is never scored by S2 under equal opportunity, and the extra streamed
    pass reads only label-1 rows: a bad feature there must still be refused (clip=False)
    exactly as in memory — the file path must not release a model on data memory refuses.
    (Held: the S1 aggregate validates every row of the file, both halves.)"""
    est = _estimator(data, clip=False)
    zeros = np.flatnonzero(data.y == 0)
    for i in (int(zeros[0]), int(zeros[-1])):  # the split puts them in either half
        bad_frame = frame.copy()
        bad_frame.loc[i, "x2"] = bad
        path = tmp_path / f"bad{i}.parquet"
        bad_frame.to_parquet(path, index=False)
        X = bad_frame[FEATURES].to_numpy()
        with pytest.raises(InvalidDataError):
            clone(est).fit(X, data.y, sensitive_features=data.A)
        with pytest.raises(InvalidDataError):
            _quiet(lambda p=path: fit_cdp_fair_from_file(p, clone(est), features=FEATURES,
                                                         target="y", sensitive="a"))


# ---------------------------------------------------------------- failures mid-stream charged
def _session_fit(path: Path, data: Any, agg: str) -> tuple[Session, Any]:
    s = Session(path, budget=Budget.approx(2.0, 1e-5), reproducible_seed=5)
    try:
        out = _quiet(lambda: s.fit_fair_classifier(
            features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
            aggregate=agg, constraints="equal_opportunity", **SETTINGS))
    except BaseException as exc:  # the attack provokes a signal
        return s, exc
    return s, out


def test_today2_signal_during_the_positive_pass_charges_the_planned_cost(
        data, parquet, monkeypatch) -> None:
    """KeyboardInterrupt inside the streamed pass over the positive-label rows (after S2's
    noisy counts were drawn): nothing returned, the Session charges exactly what the
    in-memory fit of the same data charges."""
    from dpfair.fairclass import outofcore

    s_mem, clf = _session_fit(parquet, data, "never")
    assert isinstance(clf, CDPFairClassifier)
    calls = []

    def interrupted(self, *a, **k):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(outofcore._ParquetAggregates, "_positive_histogram", interrupted)
    s, exc = _session_fit(parquet, data, "always")
    assert isinstance(exc, KeyboardInterrupt) and calls
    assert len(s.records) == 1
    assert s.records[0].params.get("failed_on_data") is True
    assert s.spent == s_mem.spent
    got, want = s.records[0].cost, s_mem.records[0].cost
    assert (got.epsilon, got.delta) == (want.epsilon, want.delta)


def test_today2_changed_counts_in_the_positive_pass_are_charged_and_withheld(
        data, parquet, monkeypatch) -> None:
    """The streamed pass sees one more positive row than the counts query (the file changed
    between the two): the fit refuses, the Session charges the planned cost, and the error
    names no count or value."""
    from dpfair.fairclass import outofcore

    real = outofcore._ParquetAggregates._positive_histogram

    def one_more(self, *a, **k):
        h = real(self, *a, **k)
        h[0, 7] += 1
        return h

    monkeypatch.setattr(outofcore._ParquetAggregates, "_positive_histogram", one_more)
    s, exc = _session_fit(parquet, data, "always")
    assert isinstance(exc, InvalidDataError)
    assert len(s.records) == 1 and s.records[0].params.get("failed_on_data") is True
    assert s.spent.epsilon == pytest.approx(SETTINGS["epsilon"])
    n_pos = int(np.sum(data.y == 1))
    text = str(exc)
    assert str(n_pos) not in text and "7" not in text.replace("1e-06", "")


# ---------------------------------------------------------- same numbers: memory vs streamed
class _EtaFold:
    """A released fold whose η̃ is the first coordinate of U (unit test stub)."""

    def eta_at(self, grid: Any, U: np.ndarray, A: np.ndarray) -> np.ndarray:
        return np.asarray(U[:, 0], dtype=np.float64)


def _edge_etas(rng: np.random.Generator, p1: float, p0: float) -> tuple[np.ndarray, np.ndarray]:
    """η̃'s whose scores hit the lattice's edges: η = 1/2 (z = +0.0 in group 1, −0.0 in
    group 0), near-ties z ≈ (2k + 1)/B, exact lattice points, the clip at ±1 (η → floor,
    η = 1) and a random bulk."""
    B = SCORE_LATTICE_BINS
    eta, grp = [], []
    for a, p in ((1, p1), (0, p0)):
        vals = [0.5, 1.0, 1e-300, 0.0, 0.25, 0.75, float(np.nextafter(0.5, 0.0)),
                float(np.nextafter(0.5, 1.0))]
        for k in (-5, -1, 0, 1, 2, 100, 1000):
            for shift in (0.0, 1.0):  # a lattice point, a half-lattice tie
                target = (2 * k + shift) / B
                g = target / p * (1 if a == 1 else -1)  # z = (2a−1)·p·g
                if g < 2.0:
                    e = 1.0 / (2.0 - g)
                    if 0 < e <= 1:
                        vals += [e, float(np.nextafter(e, 0.0)), float(np.nextafter(e, 1.0))]
        vals += list(rng.uniform(0.05, 0.95, 300))
        eta += vals
        grp += [a] * len(vals)
    return np.array(eta), np.array(grp, dtype=np.int8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_today2_streamed_histogram_gives_memory_steps_and_tau_bit_for_bit(seed) -> None:
    rng = np.random.default_rng(seed)
    n_cal = 4000
    eta, A = _edge_etas(rng, 0.3, 0.2)
    U = np.column_stack([eta, np.zeros_like(eta)])
    fold = _EtaFold()
    mem = OpportunityCalibration(eta, A, n_cal)
    req = SimpleNamespace(bins=SCORE_LATTICE_BINS)

    def histogram(positive: np.ndarray) -> np.ndarray:
        parts = [positive_score_counts(req, None, fold, positive, U[s], A[s])  # batches
                 for s in np.array_split(np.arange(eta.size), 7)]
        return np.sum(parts, axis=0)

    n1 = int(np.sum(A == 1))
    ooc = PositiveScoreHistogram(n_cal, (n1, int(A.size) - n1), SCORE_LATTICE_BINS,
                                 histogram, "stub")
    assert ooc.positive_counts() == mem.positive_counts()
    for m1, m0 in ((0.3 * n_cal, 0.2 * n_cal), (float(n1), float(A.size - n1)), (7.5, 3.25)):
        a, b = mem.steps(m1, m0), ooc.steps(m1, m0)
        np.testing.assert_array_equal(a.breaks, b.breaks)
        np.testing.assert_array_equal(a.gap, b.gap)
        np.testing.assert_array_equal(a.atom, b.atom)
    # the attack is exercised: memory snaps some group-0 scores to −0.0 (the file to +0.0)
    snapped = snap_scores(mem._z(0.3 * n_cal, 0.2 * n_cal))
    assert np.any((snapped == 0) & np.signbit(snapped))
    assert np.any(np.abs(snapped) == 1.0)
    plan = plan_budget(1.0, 1e-6, cross_fit=False, has_s2=True, check_share=0.35,
                       constraints="equal_opportunity")
    for alpha in (0.02, 0.1, 0.3):
        for fail in (None, 0.05):
            t1, c1, p1 = s2_opportunity(mem, (alpha, 0.0), plan,
                                        np.random.default_rng(100 + seed), fail)
            t2, c2, p2 = s2_opportunity(ooc, (alpha, 0.0), plan,
                                        np.random.default_rng(100 + seed), fail)
            assert np.float64(t1).tobytes() == np.float64(t2).tobytes()
            assert p1.tobytes() == p2.tobytes()
            assert c1 == c2


# ----------------------------------------------------------------- the same command twice
def test_today2_same_cli_command_twice_charges_twice_then_refuses(data, frame, tmp_path) -> None:
    """``dpfair fair-classify --constraints opportunity --aggregate always`` on the same
    TRAIN with one ledger: each run charges ε = 1 (no replay discount, fresh noise since no
    seed), and a run that would pass the cap ε = 2.5 is refused and charges nothing."""
    from dpfair.cli import app

    runner = CliRunner()
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    frame.to_csv(train, index=False)
    frame.iloc[:500].to_csv(test, index=False)
    ledger = tmp_path / "train.ledger"
    init = runner.invoke(app, ["ledger", "init", str(ledger), "--data", str(train),
                               "--epsilon", "2.5", "--delta", "1e-5"])
    assert init.exit_code == 0, init.output
    bounds = [str(v) for b in data.feature_bounds for v in b]
    args = ["fair-classify", str(train), str(test), "--target", "y", "--sensitive", "a",
            "--features", *FEATURES, "--bounds", *bounds, "--epsilon", "1", "--delta",
            "1e-6", "--alpha", "0.15", "--constraints", "opportunity", "--aggregate",
            "always", "--ledger", str(ledger), "--json"]
    taus = []
    for k in (1, 2):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["aggregated"] is True
        taus.append(out["tau"])
        shown = json.loads(runner.invoke(app, ["ledger", "show", str(ledger),
                                               "--json"]).stdout)
        assert shown["spent"]["epsilon"] == pytest.approx(float(k))
    assert taus[0] != taus[1]  # fresh noise, never the same release twice
    res = runner.invoke(app, args)
    assert res.exit_code != 0
    shown = json.loads(runner.invoke(app, ["ledger", "show", str(ledger), "--json"]).stdout)
    assert shown["spent"]["epsilon"] == pytest.approx(2.0)


@pytest.mark.parametrize("cross_fit", [False, True])
def test_today2_eo_streams_only_the_calibration_halves_positive_rows(
        data, parquet, monkeypatch, cross_fit) -> None:
    """Every S2 read of the file under equal opportunity is restricted to a calibration
    half (the counts query and each streamed pass) and the streamed passes to label 1:
    S2 never reads the training half of its fold. The streamed rows are exactly the
    calibration half's positive rows (count per group = the counts query's)."""
    from dpfair.fairclass import outofcore

    calls: list[dict[str, Any]] = []
    real_stream, real_counts = outofcore.stream_batches, outofcore.half_cell_counts

    def stream(*a, **k):
        rows = list(real_stream(*a, **k))
        calls.append({"what": "stream", "only_half": k.get("only_half"),
                      "positive_of": k.get("positive_of"),
                      "halves": sorted({int(h) for _arr, hv in rows for h in hv}),
                      "n": sum(arr.shape[0] for arr, _hv in rows)})
        return iter(rows)

    def counts(*a, **k):
        out = real_counts(*a, **k)
        calls.append({"what": "counts", "only_half": k.get("only_half"), "out": out})
        return out

    monkeypatch.setattr(outofcore, "stream_batches", stream)
    monkeypatch.setattr(outofcore, "half_cell_counts", counts)
    est = _estimator(data, cross_fit=cross_fit)
    clf = _quiet(lambda: fit_cdp_fair_from_file(parquet, clone(est), features=FEATURES,
                                                target="y", sensitive="a"))
    assert clf.constraints_ == "equal_opportunity"
    cnt = [c for c in calls if c["what"] == "counts"]
    streams = [c for c in calls if c["what"] == "stream"]
    assert len(cnt) == 1 and len(streams) == len(clf.folds_)
    if cross_fit:
        assert cnt[0]["only_half"] is None
        assert sorted(s["only_half"] for s in streams) == [0, 1]
    else:
        cal = cnt[0]["only_half"]
        assert cal in (0, 1)
        assert [s["only_half"] for s in streams] == [cal]
        assert int(cnt[0]["out"][1 - cal].sum()) == 0  # the training half is not counted
    for s in streams:
        assert s["positive_of"] == "y" and s["halves"] == [s["only_half"]]
        assert s["n"] == int(cnt[0]["out"][s["only_half"], :, 1].sum())


@pytest.mark.parametrize("batch_size", [1, 13, 1000])
def test_today2_tiny_batches_give_the_in_memory_eo_release(data, parquet, batch_size) -> None:
    """The streamed pass scores the positive rows batch by batch (here 1, 13 or 1000 rows
    per Arrow batch): η̃ of a row must not depend on which rows share its batch, so the
    released τ̂, p̃, certificate and tie seed equal the in-memory fit's bit for bit."""
    est = _estimator(data, cross_fit=True)
    mem = _quiet(lambda: clone(est).fit(data.X, data.y, sensitive_features=data.A))
    ooc = _quiet(lambda: fit_cdp_fair_from_file(parquet, clone(est), features=FEATURES,
                                                target="y", sensitive="a",
                                                batch_size=batch_size))
    assert mem.tau_.tobytes() == ooc.tau_.tobytes()
    for fm, fo in zip(mem.folds_, ooc.folds_, strict=True):
        assert fm.positive.tobytes() == fo.positive.tobytes()
    assert mem.tie_seed_ == ooc.tie_seed_
    assert mem.certified_ == ooc.certified_ and mem.certificates_ == ooc.certificates_


@pytest.mark.parametrize("case", ["no-positive-in-group-1", "no-positive-in-group-0",
                                  "no-positive-at-all"])
def test_today2_empty_positive_group_same_release_in_memory_and_streamed(case) -> None:
    """A calibration half where a group (or both) has no positive label: the noisy counts
    are clipped to ≥ 1 and S2 runs on an empty side; the streamed histogram (all-zero
    counts for that group) must give the in-memory τ̂, p̃ and certificate exactly."""
    rng = np.random.default_rng(8)
    if case == "no-positive-at-all":
        eta, A = np.zeros(0), np.zeros(0, dtype=np.int8)
    else:
        eta = rng.uniform(0.05, 0.95, 60)
        A = np.full(60, 0 if case == "no-positive-in-group-1" else 1, dtype=np.int8)
    U = np.column_stack([eta, eta])
    mem = OpportunityCalibration(eta, A, 400)
    req = SimpleNamespace(bins=SCORE_LATTICE_BINS)
    n1 = int(np.sum(A == 1))
    ooc = PositiveScoreHistogram(
        400, (n1, int(A.size) - n1), SCORE_LATTICE_BINS,
        lambda p: positive_score_counts(req, None, _EtaFold(), p, U, A), "stub")
    plan = plan_budget(1.0, 1e-6, cross_fit=False, has_s2=True, check_share=0.35,
                       constraints="equal_opportunity")
    for seed in range(5):
        for fail in (None, 0.05):
            t1, c1, p1 = s2_opportunity(mem, (0.1, 0.0), plan, np.random.default_rng(seed),
                                        fail)
            t2, c2, p2 = s2_opportunity(ooc, (0.1, 0.0), plan, np.random.default_rng(seed),
                                        fail)
            assert np.float64(t1).tobytes() == np.float64(t2).tobytes()
            assert p1.tobytes() == p2.tobytes() and c1 == c2


# ------------------------------------------------------------- public refusals charge nothing
_BAD_OPTIONS = [
    pytest.param("never", {"estimator": "forest"}, id="memory-estimator-typo"),
    pytest.param("never", {"threshold_rule": "bogus"}, id="memory-threshold-rule"),
    pytest.param("never", {"fail_prob": 2.0}, id="memory-fail-prob"),
    pytest.param("never", {"bandwidth": -1.0}, id="memory-bandwidth"),
    pytest.param("never", {"estimator": "linear", "radius": "wide"}, id="memory-radius"),
    pytest.param("always", {"estimator": "forest"}, id="file-estimator-typo"),
    pytest.param("always", {"estimator": "linear"}, id="file-linear-on-aggregates"),
    pytest.param("always", {"estimator": "linear", "constraints": "equal_opportunity"},
                 id="file-linear-eo-on-aggregates"),
]


@pytest.mark.parametrize(("agg", "kw"), _BAD_OPTIONS)
def test_today2_session_public_parameter_error_charges_nothing(data, parquet, agg, kw) -> None:
    from dpfair import InvalidParameterError

    s = Session(parquet, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    with pytest.raises(InvalidParameterError):
        _quiet(lambda: s.fit_fair_classifier(
            features=FEATURES, target="y", sensitive="a", feature_bounds=data.feature_bounds,
            aggregate=agg, **SETTINGS, **kw))
    assert s.spent.epsilon == 0.0, s.records[-1].label


@pytest.mark.parametrize("extra", [
    pytest.param(["--estimator", "linear", "--aggregate", "always"], id="linear-on-aggregates"),
    pytest.param(["--estimator", "linear", "--aggregate", "always", "--constraints",
                  "opportunity"], id="linear-eo-on-aggregates"),
    pytest.param(["--threshold-rule", "bogus"], id="threshold-rule-typo"),
    pytest.param(["--fail-prob", "2"], id="fail-prob-out-of-range"),
])
def test_today2_cli_public_parameter_error_charges_nothing(data, frame, tmp_path, extra) -> None:
    from dpfair.cli import app

    runner = CliRunner()
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    frame.to_csv(train, index=False)
    frame.iloc[:300].to_csv(test, index=False)
    ledger = tmp_path / "train.ledger"
    assert runner.invoke(app, ["ledger", "init", str(ledger), "--data", str(train),
                               "--epsilon", "5", "--delta", "1e-5"]).exit_code == 0
    bounds = [str(v) for b in data.feature_bounds for v in b]
    res = runner.invoke(app, ["fair-classify", str(train), str(test), "--target", "y",
                              "--sensitive", "a", "--features", *FEATURES, "--bounds",
                              *bounds, "--epsilon", "1", "--delta", "1e-6", "--alpha", "0.15",
                              "--ledger", str(ledger), *extra])
    assert res.exit_code == 2, res.output
    shown = json.loads(runner.invoke(app, ["ledger", "show", str(ledger), "--json"]).stdout)
    assert shown["spent"]["epsilon"] == 0.0

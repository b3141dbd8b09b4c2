"""Session.fit_fair_classifier accepts CDP-Fair's issue-20 options (``constraints``,
``on_uncertified``), validated before anything is read, passed through, charged as any fit;
and ``fit_alpha_path`` honours ``on_uncertified``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfair import InvalidParameterError, Session, UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, UncertifiedFairnessError, fit_alpha_path
from dpfair.privacy import Budget

pytestmark = pytest.mark.filterwarnings("ignore::dpfair.session.ReproducibleSeedWarning")

BOUNDS = [(0.0, 1.0), (0.0, 1.0)]


def stream(seed: int, k: int = 0) -> np.random.Generator:
    """The generator of release k of a session opened with reproducible_seed=seed."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))


def unseen(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    eta = 1.0 / (1.0 + np.exp(-(4.0 * (X[:, 0] - 0.5) + 1.5 * (2.0 * A - 1.0))))
    y = (rng.uniform(size=n) < eta).astype(np.int64)
    return X, y, A


def frame(n: int, seed: int) -> pd.DataFrame:
    X, y, A = unseen(n, seed)
    return pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": y, "a": A})


REQ = dict(features=["x1", "x2"], target="y", sensitive="a", delta=1e-6,
           feature_bounds=BOUNDS)


def _ref(df: pd.DataFrame, seed: int, **kw: object) -> CDPFairClassifier:
    return CDPFairClassifier(delta=1e-6, feature_bounds=BOUNDS, random_state=stream(seed),
                             clip=True, **kw)


@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
def test_equal_opportunity_passes_through_and_is_charged() -> None:
    df = frame(4000, 1)
    s = Session(df, budget=Budget.approx(3.0, 1e-5), reproducible_seed=2)
    clf = s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.15,
                                constraints="equal_opportunity")
    assert clf.constraints == "equal_opportunity"
    ref = _ref(df, 2, epsilon=1.0, alpha=0.15, constraints="equal_opportunity")
    ref.fit(df[["x1", "x2"]].to_numpy(), df["y"].to_numpy(), sensitive_features=df["a"].to_numpy())
    np.testing.assert_array_equal(clf.tau_, ref.tau_)  # the same fit, in law and draws
    rec = s.records[-1]
    assert rec.params["constraints"] == "equal_opportunity"
    assert rec.cost == clf.privacy_spent_
    assert s.spent.epsilon == pytest.approx(1.0)
    labels = [r.label for r in clf.privacy_ledger_.records]
    assert any("positive-label counts" in lab for lab in labels)


def test_on_uncertified_raise_charges_and_releases_no_model() -> None:
    df = frame(2000, 3)
    s = Session(df, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    with pytest.raises(UncertifiedFairnessError, match="NOT certified") as info:
        s.fit_fair_classifier(**REQ, epsilon=0.5, alpha=0.02, on_uncertified="raise")
    assert info.value.privacy_spent.epsilon == pytest.approx(0.5)
    assert s.spent.epsilon == pytest.approx(0.5)  # charged although nothing is returned
    assert len(s.records) == 1
    # "warn" (the default) returns the model and warns only after the charge
    s2 = Session(df, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    with pytest.warns(UncertifiedFairnessWarning):
        clf = s2.fit_fair_classifier(**REQ, epsilon=0.5, alpha=0.02, on_uncertified="warn")
    assert clf.certified_ is False
    assert clf.certificates_[0].released_dd == info.value.certificates[0].released_dd


@pytest.mark.parametrize(("kw", "match"), [
    ({"constraints": "parity"}, "constraints="),
    ({"on_uncertified": "ignore"}, "on_uncertified="),
    ({"constraints": "equal_opportunity", "aggregate": "sometimes"}, "aggregate="),
    ({"calibration_share": 0.95}, "calibration_share="),
    ({"calibration_share": True}, "calibration_share="),
    ({"calibration_share": 0.7, "cross_fit": True}, "cross_fit=True"),
])
def test_bad_options_are_refused_before_anything_is_read(kw: dict, match: str) -> None:
    s = Session(frame(500, 5), budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    with pytest.raises(InvalidParameterError, match=match):
        s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.1, **kw)
    assert s.records == [] or len(s.records) == 0
    assert s.spent.epsilon == 0.0


@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
def test_equal_opportunity_on_a_file_is_fitted_in_memory(tmp_path: Path) -> None:
    df = frame(3000, 6)
    path = tmp_path / "train.parquet"
    df.to_parquet(path, index=False)
    s = Session(path, budget=Budget.approx(3.0, 1e-5), reproducible_seed=1)
    clf = s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.15,
                                constraints="equal_opportunity")  # aggregate="auto"
    assert s.records[-1].params["aggregated"] is False
    assert clf.constraints == "equal_opportunity"
    assert s.spent.epsilon == pytest.approx(1.0)


# ------------------------------------------------------------------ fit_alpha_path
def test_alpha_path_raise_returns_nothing_when_an_alpha_is_uncertified() -> None:
    X, y, A = unseen(2000, 3)
    est = CDPFairClassifier(epsilon=0.5, delta=1e-6, feature_bounds=BOUNDS, random_state=0,
                            on_uncertified="raise")
    with pytest.raises(UncertifiedFairnessError, match=r"alpha=0.02 of the path") as info:
        fit_alpha_path(est, X, y, sensitive_features=A, alphas=[0.3, 0.02])
    err = info.value
    # the whole path ran: S1 once and both S2 are spent
    warn = CDPFairClassifier(epsilon=0.5, delta=1e-6, feature_bounds=BOUNDS, random_state=0)
    with pytest.warns(UncertifiedFairnessWarning, match="NOT certified"):
        models = fit_alpha_path(warn, X, y, sensitive_features=A, alphas=[0.3, 0.02])
    assert err.privacy_spent == models[0].path_privacy_spent_
    assert err.privacy_spent.epsilon > models[0].privacy_spent_.epsilon
    assert models[1].certified_ is False
    assert err.certificates[0].released_dd == models[1].certificates_[0].released_dd


def test_alpha_path_raise_keeps_a_fully_certified_path() -> None:
    X, y, A = unseen(6000, 4)
    est = CDPFairClassifier(epsilon=4.0, delta=1e-6, feature_bounds=BOUNDS, random_state=1,
                            on_uncertified="raise")
    models = fit_alpha_path(est, X, y, sensitive_features=A, alphas=[0.25, 0.3])
    assert all(m.certified_ is True for m in models)
    assert [m.on_uncertified for m in models] == ["raise", "raise"]


def test_alpha_path_refuses_a_bad_on_uncertified_before_fitting() -> None:
    X, y, A = unseen(300, 5)
    est = CDPFairClassifier(epsilon=1.0, delta=1e-6, feature_bounds=BOUNDS, random_state=1,
                            on_uncertified="never")
    with pytest.raises(InvalidParameterError, match="on_uncertified"):
        fit_alpha_path(est, X, y, sensitive_features=A, alphas=[0.1])


@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
def test_calibration_share_passes_through_as_the_estimator_fits_it() -> None:
    df = frame(3000, 8)
    s = Session(df, budget=Budget.approx(3.0, 1e-5), reproducible_seed=4)
    clf = s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.1, calibration_share=0.7)
    ref = _ref(df, 4, epsilon=1.0, alpha=0.1, calibration_share=0.7).fit(
        df[["x1", "x2"]].to_numpy(), df["y"].to_numpy(), sensitive_features=df["a"].to_numpy())
    assert clf.certificates_ == ref.certificates_
    assert np.array_equal(clf.tau_, ref.tau_)
    assert s.spent.epsilon == pytest.approx(1.0)
    assert s.records[-1].params["calibration_share"] == 0.7


def test_calibration_share_with_a_bad_value_and_aggregates_is_refused_before_reading(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train.parquet"
    frame(500, 9).to_parquet(path)
    s = Session(path, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    with pytest.raises(InvalidParameterError, match="calibration_share"):
        s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.1, calibration_share=0.95,
                              aggregate="always")
    assert s.spent.epsilon == 0.0


# ------------------------------------------------ public-parameter errors read and charge nothing
def _no_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a release reads the data raises: an error must come before them."""
    from dpfair.session._sources import FileSource, MemorySource

    def read(*_a: object, **_k: object) -> None:
        raise AssertionError("the data were read before a public-parameter error")

    for cls in (FileSource, MemorySource):
        monkeypatch.setattr(cls, "column", read)
        monkeypatch.setattr(cls, "columns", read)
    monkeypatch.setattr(Session, "_use_aggregates", read)


@pytest.mark.parametrize(("kw", "match"), [
    ({"estimator": "forest"}, "estimator="),
    ({"threshold_rule": "bogus"}, "threshold_rule="),
    ({"fail_prob": 2.0}, "fail_prob="),
    ({"bandwidth": -1.0}, "bandwidth"),
    ({"bandwidth": "wide"}, "bandwidth="),
    ({"estimator": "linear", "radius": "wide"}, "radius="),
    ({"grid_resolution": -1.0}, "grid_resolution"),
    ({"max_grid_nodes": 2.5}, "max_grid_nodes="),
    ({"s1_share": 1.5}, "s1_share"),
    ({"clip": "yes"}, "clip="),
    ({"feature_bounds": [(0.0, 1.0), (-1e308, 1e308)]}, "width"),
    ({"feature_bounds": [(0.0, 1.0)]}, "feature_bounds"),
    ({"estimator": "linear", "aggregate": "always"}, "linear"),
    ({"estimator": "linear", "aggregate": "always",
      "constraints": "equal_opportunity"}, "linear"),
    ({"categories": {"x1": [0, 1]}, "aggregate": "always"}, "categories"),
])
def test_fair_classifier_public_errors_come_before_any_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kw: dict, match: str) -> None:
    """THREATS rule 9: the estimator's own checks (CDPFairClassifier.check_params, and the
    out-of-core request's with aggregate='always') run before the file is opened for
    rows or the budget is charged; a typo costs nothing."""
    path = tmp_path / "train.parquet"
    frame(400, 2).to_parquet(path, index=False)
    s = Session(path, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    _no_reads(monkeypatch)
    req = {**REQ, **{k: v for k, v in kw.items() if k == "feature_bounds"}}
    opts = {k: v for k, v in kw.items() if k != "feature_bounds"}
    with pytest.raises(InvalidParameterError, match=match):
        s.fit_fair_classifier(**req, epsilon=1.0, alpha=0.1, **opts)
    assert len(s.records) == 0 and s.spent.epsilon == 0.0


@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
def test_check_params_is_what_fit_checks() -> None:
    """check_params refuses what fit refuses (the same functions) and accepts what fit
    accepts; a valid estimator's seeded fit is unchanged by the pre-check."""
    X, y, A = unseen(600, 4)
    for bad in ({"threshold_rule": "bogus"}, {"fail_prob": 0.7}, {"bandwidth": 0.0},
                {"estimator": "linear", "radius": -1.0}, {"epsilon": -1.0}, {"alpha": 2.0},
                {"on_uncertified": "ignore"}, {"constraints": "parity"}):
        est = CDPFairClassifier(**{"feature_bounds": BOUNDS, **bad})
        with pytest.raises(InvalidParameterError) as pre:
            est.check_params(2)
        with pytest.raises(InvalidParameterError) as fit:
            CDPFairClassifier(**{"feature_bounds": BOUNDS, **bad}).fit(
                X, y, sensitive_features=A)
        assert str(pre.value) == str(fit.value)
    for est_name in ("kernel", "linear", "auto"):
        est = CDPFairClassifier(feature_bounds=BOUNDS, estimator=est_name, random_state=3)
        assert est.check_params(2) in ("kernel", "linear")
        a = est.fit(X, y, sensitive_features=A)
        b = CDPFairClassifier(feature_bounds=BOUNDS, estimator=est_name,
                              random_state=3).fit(X, y, sensitive_features=A)
        assert np.asarray(a.tau_).tobytes() == np.asarray(b.tau_).tobytes()


@pytest.mark.parametrize(("kw", "match"), [
    ({"method": "bogus"}, "method="),
    ({"q": 1.5}, "q="),
    ({"q": [0.2, 1.5]}, "q="),
    ({"bounds": (10.0, 0.0)}, "bounds="),
    ({"bounds": (-1e308, 1e308)}, "width"),
    ({"granularity": -1.0}, "granularity="),
    ({"granularity": 4.0}, "granularity="),
])
def test_quantile_ci_public_errors_come_before_any_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kw: dict, match: str) -> None:
    """quantile_ci validates q, bounds, method and granularity by the engine's own
    dpfair.quantiles.check_request before anything is read or charged (was: charged ρ)."""
    path = tmp_path / "x.parquet"
    pd.DataFrame({"x": np.linspace(0.0, 10.0, 500)}).to_parquet(path, index=False)
    s = Session(path, budget=Budget.zcdp(2.0), reproducible_seed=0)
    _no_reads(monkeypatch)
    args = {"q": 0.5, "rho": 0.5, "bounds": (0.0, 10.0), **kw}
    with pytest.raises(InvalidParameterError, match=match):
        s.quantile_ci("x", **args)
    assert len(s.records) == 0 and s.spent.rho == 0.0


# ------------------------------------- aggregate="auto": the path is public, so is its refusal
@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
@pytest.mark.parametrize(("kw", "match"), [
    ({"estimator": "linear"}, "linear"),
    ({"estimator": "linear", "constraints": "equal_opportunity"}, "linear"),
])
def test_auto_on_a_big_file_refuses_what_aggregates_cannot_serve_uncharged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kw: dict, match: str
) -> None:
    """A file over AGGREGATE_ROWS rows goes out of core under "auto"; a request that path
    refuses (the linear score, a calibration share) used to be refused inside the release,
    after the charge. The row count is public: the refusal now comes first, uncharged."""
    import dpfair.session._session as session_mod

    path = tmp_path / "train.parquet"
    frame(500, 9).to_parquet(path)
    monkeypatch.setattr(session_mod, "AGGREGATE_ROWS", 100)  # 500 rows count as "big"
    s = Session(path, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    with pytest.raises(InvalidParameterError, match=match):
        s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.1, aggregate="auto", **kw)
    assert s.spent.epsilon == 0.0
    assert s.records == []
    # the same request on a file under the threshold is served in memory and charged
    monkeypatch.setattr(session_mod, "AGGREGATE_ROWS", 10_000)
    clf = s.fit_fair_classifier(**REQ, epsilon=1.0, alpha=0.1, aggregate="auto", **kw)
    assert s.records[-1].params["aggregated"] is False
    assert s.spent.epsilon == pytest.approx(1.0)
    assert clf.certificates_ is not None


def test_auto_with_an_unreadable_file_is_left_to_the_charged_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether DuckDB can count a file's rows depends on its content: that failure must not
    be an uncharged pre-check (it would be a free data-dependent signal)."""
    from dpfair.session._sources import FileSource

    path = tmp_path / "train.parquet"
    frame(500, 9).to_parquet(path)
    s = Session(path, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)

    def broken(self: object) -> int:
        from dpfair import InvalidDataError

        raise InvalidDataError("cannot read")

    monkeypatch.setattr(FileSource, "row_count", broken)
    assert s._auto_out_of_core() is False

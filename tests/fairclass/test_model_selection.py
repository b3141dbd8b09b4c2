"""scikit-learn model selection with the group-aware classifiers (issue 20, item 4).

The classifiers request ``sensitive_features`` by default under metadata routing, so
``cross_val_score`` and ``GridSearchCV`` forward each fold's groups; a call without the
groups is a :class:`MissingSensitiveFeaturesError`, and the tests pin down what scikit-learn
makes of that error (a raised ``ValueError`` when every fit fails, a NaN score with a
``UserWarning`` when only scoring fails under the default ``error_score=np.nan``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from dpfair import InvalidDataError, InvalidParameterError
from dpfair.fairclass import (
    CDPFairClassifier,
    FairPlugInClassifier,
    PlugInClassifier,
    PrivatePlugInClassifier,
)
from dpfair.fairclass._routing import MissingSensitiveFeaturesError
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import FDPFairClassifier

BOUNDS = ((0.0, 1.0), (0.0, 1.0))
ALL = (CDPFairClassifier, PrivatePlugInClassifier, FairPlugInClassifier, PlugInClassifier)
METHODS = ("fit", "predict", "predict_proba", "score")

pytestmark = pytest.mark.filterwarnings("ignore::dpfair._warnings.UncertifiedFairnessWarning")


def _make(cls, **kw):
    base = {"feature_bounds": BOUNDS, "random_state": 0}
    if cls in (CDPFairClassifier, PrivatePlugInClassifier):
        base.update(epsilon=1.0, delta=1e-6)
    if cls in (CDPFairClassifier, FairPlugInClassifier):
        base.update(alpha=0.1)
    base.update(kw)
    return cls(**base)


@pytest.fixture(scope="module")
def data():
    return simulate(1500, 31)


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


# --------------------------------------------------------------------------- requests
@pytest.mark.parametrize("cls", (*ALL, FDPFairClassifier))
def test_sensitive_features_requested_by_default(cls, routing):
    router = cls(feature_bounds=BOUNDS).get_metadata_routing()
    for method in METHODS:
        requests = getattr(router, method).requests
        assert requests.get("sensitive_features") is True, (method, requests)
    # score's sample_weight keeps scikit-learn's default (not requested unless asked for)
    if cls in ALL:
        assert router.score.requests.get("sample_weight") is None


def test_request_can_be_switched_off(data, routing):
    clf = _make(PlugInClassifier).set_score_request(sensitive_features=False)
    with pytest.raises(MissingSensitiveFeaturesError, match=r"PlugInClassifier\.score"):
        cross_val_score(
            clf, data.X, data.y, cv=2, params={"sensitive_features": data.A}, error_score="raise"
        )


# --------------------------------------------------------------------------- with routing
@pytest.mark.parametrize("cls", ALL)
def test_cross_val_score_with_routing_is_finite_and_uses_each_folds_groups(cls, data, routing):
    clf = _make(cls)
    cv = KFold(3, shuffle=True, random_state=5)
    scores = cross_val_score(
        clf, data.X, data.y, cv=cv, params={"sensitive_features": data.A}, error_score="raise"
    )
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    assert np.all((scores > 0.5) & (scores <= 1.0))
    # the same numbers by hand: the router splits sensitive_features with the rows
    by_hand = []
    for train, test in cv.split(data.X):
        est = clone(clf).fit(data.X[train], data.y[train], sensitive_features=data.A[train])
        by_hand.append(est.score(data.X[test], data.y[test], sensitive_features=data.A[test]))
    np.testing.assert_array_equal(scores, by_hand)


def test_misaligned_groups_change_the_score(data, routing):
    """The groups matter: routing reversed groups gives a different score (not ignored)."""
    clf = _make(FairPlugInClassifier)
    cv = KFold(3, shuffle=True, random_state=5)
    good = cross_val_score(clf, data.X, data.y, cv=cv, params={"sensitive_features": data.A})
    bad = cross_val_score(clf, data.X, data.y, cv=cv, params={"sensitive_features": 1 - data.A})
    assert not np.array_equal(good, bad)


def test_grid_search_over_alpha(data, routing):
    grid = GridSearchCV(
        _make(CDPFairClassifier), {"alpha": [0.05, 0.1, 0.2]}, cv=2, error_score="raise"
    )
    grid.fit(data.X, data.y, sensitive_features=data.A)
    assert grid.best_params_["alpha"] in (0.05, 0.1, 0.2)
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
    assert len(grid.cv_results_["params"]) == 3
    best = grid.best_estimator_
    assert best.alpha == grid.best_params_["alpha"] and hasattr(best, "folds_")
    # the refitted model scores and predicts with routed or direct groups
    assert 0.5 < grid.score(data.X, data.y, sensitive_features=data.A) <= 1.0
    # (GridSearchCV.predict takes no metadata: predict with the refitted best_estimator_)
    assert best.predict(data.X, sensitive_features=data.A).shape == (data.X.shape[0],)


def test_routing_without_groups_raises(data, routing):
    clf = _make(PlugInClassifier)
    with pytest.raises(MissingSensitiveFeaturesError, match=r"PlugInClassifier\.fit"):
        cross_val_score(clf, data.X, data.y, cv=2, error_score="raise")
    # default error_score: every fit fails, so scikit-learn raises (no NaN array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's FitFailedWarning
        with pytest.raises(ValueError, match="sensitive_features is required"):
            cross_val_score(clf, data.X, data.y, cv=2)


# --------------------------------------------------------------------------- without routing
def test_no_routing_plain_call_raises_with_the_fix(data):
    clf = _make(CDPFairClassifier)
    with pytest.raises(ValueError, match="All the 3 fits failed") as info:
        cross_val_score(clf, data.X, data.y, cv=3)
    assert "sensitive_features is required" in str(info.value)
    assert "enable_metadata_routing=True" in str(info.value)
    with pytest.raises(MissingSensitiveFeaturesError, match=r"CDPFairClassifier\.fit"):
        cross_val_score(clf, data.X, data.y, cv=3, error_score="raise")


def test_no_routing_params_reach_fit_only(data):
    """Without routing scikit-learn passes ``params`` to fit only; score then fails.

    This pins scikit-learn's behaviour (1.9): a scoring failure under the default
    ``error_score=np.nan`` becomes NaN with a ``UserWarning`` that carries our message; with
    ``error_score="raise"`` (what the docs recommend) the error propagates.
    """
    clf = _make(PlugInClassifier)
    params = {"sensitive_features": data.A}
    with pytest.warns(UserWarning, match="Scoring failed") as record:
        scores = cross_val_score(clf, data.X, data.y, cv=3, params=params)
    assert np.all(np.isnan(scores))
    text = " ".join(str(w.message) for w in record)
    assert "sensitive_features is required" in text and "enable_metadata_routing" in text
    with pytest.raises(MissingSensitiveFeaturesError, match=r"PlugInClassifier\.score"):
        cross_val_score(clf, data.X, data.y, cv=3, params=params, error_score="raise")


# --------------------------------------------------------------------------- direct calls
@pytest.mark.parametrize("cls", ALL)
def test_direct_calls_without_groups(cls, data):
    clf = _make(cls)
    with pytest.raises(MissingSensitiveFeaturesError, match=rf"{cls.__name__}\.fit"):
        clf.fit(data.X, data.y)
    clf.fit(data.X, data.y, sensitive_features=data.A)
    for method, args in (("predict", ()), ("predict_proba", ()), ("score", (data.y,))):
        with pytest.raises(MissingSensitiveFeaturesError) as info:
            getattr(clf, method)(data.X, *args)
        msg = str(info.value)
        assert f"{cls.__name__}.{method}" in msg
        assert "sensitive_features=A" in msg and "enable_metadata_routing=True" in msg
        assert isinstance(info.value, InvalidParameterError)
        assert isinstance(info.value, InvalidDataError)


def test_fdp_methods_without_groups():
    clf = FDPFairClassifier(feature_bounds=BOUNDS)
    X = np.full((4, 2), 0.5)
    with pytest.raises(MissingSensitiveFeaturesError, match=r"FDPFairClassifier\.fit"):
        clf.fit([X, X], [np.zeros(4), np.ones(4)])
    for method, args in (("predict", ()), ("predict_proba", ()), ("score", (np.zeros(4),))):
        with pytest.raises(MissingSensitiveFeaturesError, match=rf"FDPFairClassifier\.{method}"):
            getattr(clf, method)(X, *args)


# --------------------------------------------------------------------------- Fairlearn
def test_metricframe_example(data):
    fairlearn_metrics = pytest.importorskip("fairlearn.metrics")
    from sklearn.metrics import accuracy_score

    test = simulate(1000, 32)
    clf = _make(CDPFairClassifier).fit(data.X, data.y, sensitive_features=data.A)
    pred = clf.predict(test.X, sensitive_features=test.A)
    frame = fairlearn_metrics.MetricFrame(
        metrics={"accuracy": accuracy_score, "selection_rate": fairlearn_metrics.selection_rate},
        y_true=test.y,
        y_pred=pred,
        sensitive_features=test.A,
    )
    rates = frame.by_group["selection_rate"]
    assert np.isclose(frame.difference()["selection_rate"], abs(rates[1] - rates[0]))

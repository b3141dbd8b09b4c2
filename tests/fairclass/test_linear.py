"""The linear (objective-perturbation logistic) group score of CDP-Fair."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest

import dpfair
from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._linear import (
    FeatureMap,
    ReleasedLinearFold,
    fit_linear_release,
    objective_perturbation_logistic,
    plan_linear_s1,
)
from dpfair.fairclass.adult_full import ADULT_FULL_FEATURES, load_full_adult


def _mixed(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(0, 10, n)
    colour = rng.choice(["red", "green", "blue"], n)
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    logit = 0.5 * (x1 - 5) + np.where(colour == "red", 1.0, -0.5) + 0.8 * (2 * A - 1)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    X = np.empty((n, 2), dtype=object)
    X[:, 0], X[:, 1] = x1, colour
    return X, y, A


BOUNDS = [(0.0, 10.0), None]
CATS = {1: ["red", "green", "blue"]}


def _clf(**kw):
    base = dict(epsilon=1.0, delta=1e-6, alpha=0.1, feature_bounds=BOUNDS, categories=CATS,
                estimator="linear", random_state=0)
    base.update(kw)
    return CDPFairClassifier(**base)


def test_plan_matches_the_derivation():
    plan = plan_linear_s1(1.0, 1e-6, n_rows=1000, width=6)
    zeta = 1.0 + 2.0**-40
    a = math.sqrt(2 * math.log(1 / plan.delta_noise))
    u = 2.0 * zeta / plan.sigma_b
    assert u * a + u * u / 2 == pytest.approx(plan.epsilon_noise, rel=1e-12)
    assert math.log1p(0.25 * zeta**2 / plan.regulariser) == pytest.approx(plan.epsilon_jacobian)
    total = (plan.epsilon_count + plan.epsilon_jacobian + plan.epsilon_noise
             + plan.epsilon_output)
    assert total == pytest.approx(1.0)
    assert plan.epsilon_output == pytest.approx(0.02)
    assert plan.delta_count + plan.delta_noise + plan.delta_output == pytest.approx(1e-6)


def test_newton_reaches_the_minimiser():
    rng = np.random.default_rng(0)
    Phi = rng.uniform(0, 1, (500, 4)) / 2.0
    y = (rng.uniform(size=500) < 0.5).astype(np.int64)
    plan = plan_linear_s1(1.0, 1e-6, n_rows=500, width=4)
    rel = fit_linear_release(Phi, y, plan, np.random.default_rng(3))
    b = np.random.default_rng(3).normal(0, plan.sigma_b, 4)
    s = 2.0 * y - 1
    th = rel.theta_hat
    sig = 1 / (1 + np.exp(s * (Phi @ th)))
    grad = -(Phi.T @ (s * sig)) + plan.regulariser * th + b
    assert np.linalg.norm(grad) < 1e-6  # the perturbed objective's stationary point
    # The release is the lattice point of θ̂ plus the output noise, within a few σ_out.
    assert np.max(np.abs(rel.theta - th)) < 10 * plan.sigma_output + 2.0**-plan.lattice_bits
    th2 = objective_perturbation_logistic(Phi, y, plan, np.random.default_rng(3))
    np.testing.assert_array_equal(th2, rel.theta)


def test_ledger_and_guarantee_are_exact():
    X, y, A = _mixed(4000, 1)
    clf = _clf()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert clf.estimator_ == "linear" and clf.grid_ is None
    assert clf.privacy_spent_.epsilon == pytest.approx(1.0)
    assert clf.privacy_spent_.delta == pytest.approx(1e-6)
    labels = [r.label for r in clf.privacy_ledger_.records]
    assert any("objective perturbation" in lab for lab in labels)
    assert any("certificate" in lab for lab in labels)


def test_predict_is_deterministic_post_processing_and_model_has_no_rows():
    X, y, A = _mixed(3000, 2)
    clf = _clf(cross_fit=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    p1 = clf.predict(X[:500], sensitive_features=A[:500])
    folds_before = [f.theta.copy() for f in clf.folds_]
    p2 = clf.predict(X[:500], sensitive_features=A[:500])
    np.testing.assert_array_equal(p1, p2)  # no noise at predict: the same labels
    assert all(np.array_equal(a, f.theta) for a, f in zip(folds_before, clf.folds_, strict=True))
    blob = pickle.dumps(clf)
    assert len(blob) < 20_000  # θ̃, π̃, τ̂ and the public map only: no training rows
    assert all(isinstance(f, ReleasedLinearFold) for f in clf.folds_)
    out = clf.export_released_model()
    assert out["group_score"] == "linear" and len(out["folds"]) == 2
    clone = pickle.loads(blob)
    np.testing.assert_array_equal(clone.predict(X[:500], sensitive_features=A[:500]), p1)


@pytest.mark.parametrize(
    ("mutate", "exc", "match"),
    [
        (lambda X, A: (np.where(X == "red", "purple", X), A), dpfair.InvalidDataError,
         "not in its public category list"),
        (lambda X, A: (X, np.where(A == 1, 2, A)), dpfair.InvalidDataError, "sensitive"),
    ],
)
def test_bad_data_one_clear_error_nothing_fitted(mutate, exc, match):
    X, y, A = _mixed(600, 3)
    Xb, Ab = mutate(X, A)
    clf = _clf()
    with pytest.raises(exc, match=match):
        clf.fit(Xb, y, sensitive_features=Ab)
    assert not hasattr(clf, "folds_")


def test_feature_without_bounds_is_refused():
    X, y, A = _mixed(600, 4)
    clf = _clf(feature_bounds=[None, None])
    with pytest.raises(dpfair.MissingPublicBoundError, match="feature_bounds"):
        clf.fit(X, y, sensitive_features=A)
    assert not hasattr(clf, "folds_")
    with pytest.raises(dpfair.InvalidParameterError, match="categories"):
        _clf(estimator="kernel").fit(X, y, sensitive_features=A)


def test_auto_keeps_the_grid_for_small_d():
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(2000, 2))
    A = (rng.uniform(size=2000) < 0.5).astype(np.int8)
    y = (rng.uniform(size=2000) < X[:, 0]).astype(np.int64)
    clf = CDPFairClassifier(feature_bounds=[(0, 1), (0, 1)], random_state=0,
                            threshold_rule="target")
    clf.fit(X, y, sensitive_features=A)
    assert clf.estimator_ == "kernel"


def test_feature_map_encodes_public_categories():
    fm = FeatureMap.build([(0, 10), None], CATS, 2)
    U = fm.transform(np.array([[5.0, "blue"], [10.0, "red"]], dtype=object))
    np.testing.assert_allclose(U, [[0.5, 0, 0, 1], [1.0, 1, 0, 0]])
    assert fm.norm_bound == pytest.approx(2.0)


def test_full_adult_is_bundled_with_public_description():
    d = load_full_adult()
    assert d.n == 48_842 and d.X.shape[1] == len(ADULT_FULL_FEATURES) == 13
    fm = FeatureMap.build(d.bounds, d.categories, 13)
    U = fm.transform(d.X)  # every value inside the public bounds and category lists
    assert U.shape == (48_842, fm.width) and np.all((U >= 0) & (U <= 1))
    assert 0.2 < d.y.mean() < 0.3 and 0.6 < d.A.mean() < 0.7

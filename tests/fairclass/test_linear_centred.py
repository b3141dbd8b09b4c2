"""The centred, radius-clipped linear score (issue 19): design, radius, certificate, ledger,
scores, and the certified cap on fresh population draws.

The many-feature design (benchmarks/fairclass_many_features.py): 20 standard-normal
features clipped to the public box [−4, 4], A ~ Bern(0.5) shifting the first feature,
η = sigmoid(1.5·Σx_j/√20 + 0.5(2a − 1)).
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

import dpfair
from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._linear import (
    RADIUS_SHARE,
    FeatureMap,
    LinearDesign,
    _blocked_column_sums,
    _exact_column_sums,
    _Problem,
    fit_linear_release,
    plan_linear_s1,
    radius_ladder,
    radius_scores,
)
from tests._stats import min_successes

D = 20
BOX = [(-4.0, 4.0)] * D


def many_features(n: int, rng: np.random.Generator, d: int = D):
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    X = rng.normal(size=(n, d))
    X[:, 0] += 0.5 * (2 * A - 1)
    X = np.clip(X, -4.0, 4.0)
    logit = 1.5 * X.sum(axis=1) / math.sqrt(d) + 0.5 * (2 * A - 1)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return X, y, A


def _fit(X, y, A, **kw):
    base = dict(epsilon=1.0, delta=1e-8, alpha=0.1, feature_bounds=BOX, estimator="linear",
                random_state=0)
    base.update(kw)
    clf = CDPFairClassifier(**base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    return clf


# ---------------------------------------------------------------------------- the design
MIXED_BOUNDS = [(0.0, 10.0), (-1.0, 1.0), None, None]
MIXED_CATS = {2: ["r", "g", "b"], 3: ["x", "y"]}


def _mixed_u(n: int, seed: int) -> tuple[FeatureMap, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.empty((n, 4), dtype=object)
    X[:, 0] = rng.choice([0.0, 10.0, 5.0, 3.3], n)  # box corners and interior
    X[:, 1] = rng.uniform(-1, 1, n)
    X[:, 2] = rng.choice(["r", "g", "b"], n)
    X[:, 3] = rng.choice(["x", "y"], n)
    fm = FeatureMap.build(MIXED_BOUNDS, MIXED_CATS, 4)
    return fm, fm.transform(X)


@pytest.mark.parametrize("radius", [0.3, 1.0, 1.7, 2.0, 5.0])
def test_computed_rows_have_norm_at_most_one_in_exact_arithmetic(radius):
    fm, U = _mixed_u(300, 1)
    dm = LinearDesign.for_map(fm, radius)
    Phi = dm.rows(U, np.arange(300) % 2)
    assert dm.box_radius == pytest.approx(2.0)
    for row in Phi:
        assert sum(Fraction(float(v)) ** 2 for v in row) <= 1
    # numeric columns are centred ([-1, 1]); one-hot entries keep 0 / a common scale
    V = dm.centred(U)
    assert V[:, 0].min() == -1.0 and V[:, 0].max() == 1.0
    assert set(np.unique(V[:, 2:])) <= {0.0, 1.0}


def test_clipping_shrinks_only_long_rows_and_keeps_their_direction():
    fm, U = _mixed_u(200, 2)
    dm = LinearDesign.for_map(fm, 1.2)
    V = dm.centred(U)
    norms = np.linalg.norm(V, axis=1)
    Phi = dm.rows(U, np.zeros(200))
    feat = Phi[:, 2:] * dm.norm_bound
    short = norms <= 1.2
    np.testing.assert_allclose(feat[short], V[short], rtol=1e-8)
    np.testing.assert_allclose(np.linalg.norm(feat[~short], axis=1), 1.2, rtol=1e-8)
    cos = np.sum(feat * V, axis=1) / (np.linalg.norm(feat, axis=1) * norms)
    np.testing.assert_allclose(cos, 1.0, rtol=1e-12)


# ---------------------------------------------------------------------------- certificate
def test_exact_column_sums_bound_the_true_sums():
    rng = np.random.default_rng(3)
    # heavy cancellation: large terms of both signs that cancel to a tiny remainder
    t = rng.normal(size=(3000, 4)) * np.array([1.0, 1e-3, 1e3, 1e-12])
    t[-1] = -t[:-1].sum(axis=0) + 1e-9
    s, e = _exact_column_sums(t, None, 4)
    for j in range(4):
        exact = sum(Fraction(float(v)) for v in t[:, j])
        assert abs(Fraction(float(s[j])) - exact) <= Fraction(float(e[j]))
    # the blocked two-level sums (one pass) with the bound from Σ|t|
    s3, e3 = _blocked_column_sums(t, np.abs(t).sum(axis=0) * (1 + 2.0**-20))
    for j in range(4):
        exact = sum(Fraction(float(v)) for v in t[:, j])
        assert abs(Fraction(float(s3[j])) - exact) <= Fraction(float(e3[j]))
    # the sparse form (flat terms with their columns) gives the same bound logic
    cols = np.repeat(np.arange(4)[None, :], 3000, axis=0).ravel()
    s2, e2 = _exact_column_sums(t.ravel(), cols, 4)
    for j in range(4):
        exact = sum(Fraction(float(v)) for v in t[:, j])
        assert abs(Fraction(float(s2[j])) - exact) <= Fraction(float(e2[j]))


def _exact_gradient_norm(Phi, y, lam, b, theta) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        th = [Decimal(float(v)) for v in theta]
        g = [Decimal(float(lam)) * t + Decimal(float(bj)) for t, bj in zip(th, b, strict=True)]
        one = Decimal(1)
        for row, yi in zip(Phi.tolist(), y, strict=True):
            r = [Decimal(v) for v in row]
            s = Decimal(2 * int(yi) - 1)
            m = s * sum((a * t for a, t in zip(r, th, strict=True)), Decimal(0))
            sig = one / (one + m.exp())
            for j, a in enumerate(r):
                g[j] -= a * s * sig
        return sum((v * v for v in g), Decimal(0)).sqrt()


@pytest.mark.parametrize(("kind", "seed"), [("dense", 0), ("sparse", 1)])
def test_certificate_holds_in_exact_arithmetic_on_the_centred_design(kind, seed):
    rng = np.random.default_rng(seed)
    n = 300
    if kind == "dense":
        X, y, A = many_features(n, rng, d=6)
        fm = FeatureMap.build([(-4.0, 4.0)] * 6, None, 6)
        U = fm.transform(X)
    else:  # one-hot heavy: 2 numeric columns + 2 × 20 categories (sparse storage)
        cats = {2: [f"c{k}" for k in range(20)], 3: [f"d{k}" for k in range(20)]}
        fm = FeatureMap.build([(0.0, 1.0), (0.0, 1.0), None, None], cats, 4)
        X = np.empty((n, 4), dtype=object)
        X[:, 0], X[:, 1] = rng.uniform(size=n), rng.uniform(size=n)
        X[:, 2], X[:, 3] = rng.choice(cats[2], n), rng.choice(cats[3], n)
        U = fm.transform(X)
        A = (rng.uniform(size=n) < 0.5).astype(np.int8)
        y = (rng.uniform(size=n) < 0.3 + 0.4 * X[:, 0].astype(float)).astype(np.int64)
    Phi = LinearDesign.for_map(fm, 1.0).rows(U, A)
    assert (Phi < 0).any()  # the centred design has negative entries
    plan = plan_linear_s1(1.0, 1e-6, n_rows=n, width=Phi.shape[1])
    prob = _Problem.build(Phi, y, plan.regulariser, np.zeros(Phi.shape[1]))
    assert prob.dense is (kind == "dense")
    rel = fit_linear_release(Phi, y, plan, np.random.default_rng(seed))
    exact = _exact_gradient_norm(Phi, y, plan.regulariser, rel.b, rel.theta_hat)
    assert exact <= Decimal(rel.gradient_bound) <= Decimal(plan.tolerance)
    # the certified (g, E) pair brackets the exact gradient at any θ, not only at θ̂
    theta = rel.theta_hat + np.random.default_rng(9).normal(0, 0.5, rel.theta_hat.size)
    full = _Problem.build(Phi, y, plan.regulariser, rel.b)
    exact_g = _exact_gradient_norm(Phi, y, plan.regulariser, rel.b, theta)
    errs = []
    for fine in (False, True):  # the coarse (per-row maxima) and the fine bound
        g, err = full.certified_gradient(theta, fine=fine)
        norm_g = Decimal(float(np.linalg.norm(g)))  # (its own rounding: relative 1e-13)
        assert abs(exact_g - norm_g) <= Decimal(err) + norm_g * Decimal("1e-13")
        errs.append(err)
    assert errs[1] <= errs[0]


def test_a_row_longer_than_one_is_refused():
    plan = plan_linear_s1(1.0, 1e-6, n_rows=10, width=2)
    Phi = np.full((10, 2), 0.8)
    with pytest.raises(dpfair.InvalidParameterError, match="norm above 1"):
        fit_linear_release(Phi, np.arange(10) % 2, plan, np.random.default_rng(0))


# ---------------------------------------------------------------------------- radius
def test_radius_scores_have_sensitivity_one_under_replace_one():
    rng = np.random.default_rng(4)
    norms = rng.uniform(0, 2, 501)
    ladder = radius_ladder(2.0)
    d = radius_scores(norms, ladder)
    for i in range(25):
        other = norms.copy()
        other[i * 7] = rng.choice([0.0, 2.0, float(rng.uniform(0, 2))])
        assert np.max(np.abs(radius_scores(other, ladder) - d)) <= 1
    # the score is minimal at the ladder point nearest the median
    r_best = ladder[int(np.argmin(d))]
    assert abs(np.mean(norms > r_best) - 0.5) < 0.05


def test_auto_radius_is_charged_and_box_or_public_radius_is_free():
    X, y, A = many_features(4000, np.random.default_rng(5))
    auto = _fit(X, y, A)
    labels = [r.label for r in auto.privacy_ledger_.records]
    rad = [r for r in auto.privacy_ledger_.records if "row radius" in r.label]
    assert len(rad) == 1 and rad[0].budget.delta == 0.0
    assert rad[0].budget.epsilon == pytest.approx(RADIUS_SHARE * auto.budget_plan_.s1.epsilon)
    assert auto.privacy_spent_.epsilon == pytest.approx(1.0)
    assert auto.privacy_spent_.delta == pytest.approx(1e-8)
    s1 = [r.budget for r in auto.privacy_ledger_.records
          if r.label.startswith("fit 1 / S1") and not r.part_of]
    assert sum(b.epsilon for b in s1) == pytest.approx(auto.budget_plan_.s1.epsilon, rel=1e-12)
    assert sum(b.delta for b in s1) == pytest.approx(auto.budget_plan_.s1.delta, rel=1e-12)
    r_auto = auto.folds_[0].design_map.radius
    assert r_auto in radius_ladder(math.sqrt(D)).tolist()
    for radius in ("box", 1.3):
        clf = _fit(X, y, A, radius=radius)
        assert not any("row radius" in r.label for r in clf.privacy_ledger_.records)
        assert clf.privacy_spent_.epsilon == pytest.approx(1.0)
        expect = math.sqrt(D) if radius == "box" else 1.3
        assert clf.folds_[0].design_map.radius == expect
    assert any("objective perturbation" in lab for lab in labels)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), "median", True])
def test_bad_radius_is_one_clear_error_nothing_fitted(bad):
    X, y, A = many_features(600, np.random.default_rng(6))
    clf = CDPFairClassifier(feature_bounds=BOX, estimator="linear", radius=bad)
    with pytest.raises(dpfair.InvalidParameterError, match="radius"):
        clf.fit(X, y, sensitive_features=A)
    assert not hasattr(clf, "folds_")


# ---------------------------------------------------------------------------- scores
def test_scores_are_post_processing_of_the_release(monkeypatch):
    import dpfair.mechanisms as mech

    X, y, A = many_features(3000, np.random.default_rng(7))
    clf = _fit(X, y, A)
    Xq, Aq = X[:400].copy(), A[:400].copy()
    eta = clf.predict_eta(Xq, sensitive_features=Aq)

    def no_noise(*a, **k):
        raise AssertionError("a score drew noise")

    for name in ("sample_discrete_gaussian", "choose_pieces", "lattice_laplace"):
        monkeypatch.setattr(mech, name, no_noise, raising=False)
    # η̃ from the exported numbers alone: sigmoid(θ̃·φ) with the public design
    out = clf.export_released_model()
    fold = out["folds"][0]
    dm = LinearDesign.for_map(clf.feature_map_, fold["design"]["radius"])
    Phi = dm.rows(clf.feature_map_.transform(Xq), Aq)
    np.testing.assert_allclose(eta, 1 / (1 + np.exp(-(Phi @ np.array(fold["theta"])))),
                               rtol=1e-12)
    np.testing.assert_array_equal(clf.predict_eta(Xq, sensitive_features=Aq), eta)
    assert np.all((eta >= 0) & (eta <= 1))
    # the decision margin agrees in sign with the fair decisions (one fold)
    dec = clf.decision_function(Xq, sensitive_features=Aq)
    pred = clf.predict(Xq, sensitive_features=Aq)
    np.testing.assert_array_equal(pred, (dec >= 0).astype(np.int64))
    with pytest.raises(dpfair.InvalidParameterError, match="sensitive_features"):
        clf.predict_eta(Xq)


def test_kernel_fold_exposes_its_eta_too():
    rng = np.random.default_rng(8)
    X = rng.uniform(size=(3000, 2))
    A = (rng.uniform(size=3000) < 0.5).astype(np.int8)
    y = (rng.uniform(size=3000) < X[:, 0]).astype(np.int64)
    clf = CDPFairClassifier(feature_bounds=[(0, 1), (0, 1)], random_state=0,
                            threshold_rule="target")
    clf.fit(X, y, sensitive_features=A)
    eta = clf.predict_eta(X[:100], sensitive_features=A[:100])
    assert eta.shape == (100,) and np.all((eta >= 0) & (eta <= 1))
    dec = clf.decision_function(X[:100], sensitive_features=A[:100])
    assert dec.shape == (100,)


# ---------------------------------------------------------------------------- guarantee
_POP = many_features(100_000, np.random.default_rng(919_191))


def test_certified_cap_holds_per_release_on_fresh_population_draws():
    """30 fits on fresh draws (N = 6000, ε = 1, α = 0.1); the population |DD| of each is
    measured on 10^5 fresh draws. By the guarantee P(|DD| > α and certified) ≤ β = 0.05, so
    the count of fits with |DD| ≤ α or not certified is compared with the exact binomial
    bound at false-alarm probability 1e-6."""
    Xp, _, Ap = _POP
    ok = 0
    certified = 0
    for rep in range(30):
        X, y, A = many_features(6000, np.random.default_rng(55_000 + rep))
        clf = _fit(X, y, A, delta=3000.0**-2, random_state=rep)
        p = clf.predict(Xp, sensitive_features=Ap).astype(float)
        dd = p[Ap == 1].mean() - p[Ap == 0].mean()
        ok += int(abs(dd) <= 0.1 or not clf.certified_)
        certified += int(bool(clf.certified_))
    assert ok >= min_successes(30, 0.95)
    assert certified >= 1

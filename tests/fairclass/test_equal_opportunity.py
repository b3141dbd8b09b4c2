"""Equal opportunity (issue 20, item 3): metric, fair-Bayes score, privacy, certificate.

Statistical checks use exact binomial bounds at false-alarm probability 1e-6; the
population is 100,000 fresh draws of the paper's design.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpfair import InvalidDataError, UncertifiedFairnessWarning
from dpfair.fairclass import (
    CDPFairClassifier,
    FairPlugInClassifier,
    equal_opportunity_difference,
)
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._opportunity import OpportunityCalibration, s2_opportunity
from dpfair.fairclass._rule import opportunity_scores
from dpfair.fairclass._threshold import threshold_law_from_steps
from dpfair.fairclass.datasets import simulate
from tests._stats import min_successes

_BIG = simulate(100_000, rng=4242)


def _eod(clf):
    p = clf.predict_proba(_BIG.X, sensitive_features=_BIG.A)[:, 1]
    return equal_opportunity_difference(_BIG.y, p, _BIG.A)


# ---------------------------------------------------------------------------- metric
def test_metric_matches_definition_and_fairlearn_convention():
    y = np.array([1, 1, 1, 0, 1, 1, 0, 1])
    a = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    pred = np.array([1, 0, 1, 1, 1, 0, 1, 1])
    # TPR_1 = 2/3, TPR_0 = 2/3 → 0; move one prediction.
    assert equal_opportunity_difference(y, pred, a) == pytest.approx(0.0)
    pred2 = pred.copy()
    pred2[1] = 1
    assert equal_opportunity_difference(y, pred2, a) == pytest.approx(1.0 - 2.0 / 3.0)
    with pytest.raises(InvalidDataError, match="positive label"):
        equal_opportunity_difference(np.array([0, 0, 1, 1]), np.ones(4), np.array([1, 1, 0, 0]))


# ---------------------------------------------------------------------------- the score
def test_score_threshold_is_the_lagrangian_group_threshold():
    """1{Z ≥ λ} (group 1) / 1{Z ≤ λ} (group 0) equals η_a > 1/(2 − λ(2a − 1)/p_{a,1})."""
    rng = np.random.default_rng(0)
    eta = rng.uniform(0.01, 0.99, 2000)
    A = (rng.uniform(size=2000) < 0.4).astype(np.int8)
    pos = np.array([0.3, 0.15])
    z = opportunity_scores(eta, A, pos)
    for lam in (-0.2, -0.05, 0.0, 0.07, 0.14):
        f = np.where(A == 1, z >= lam, z <= lam)
        thr = 1.0 / (2.0 - lam * (2.0 * A - 1.0) / pos[A])
        want = eta >= thr
        # equal except within floating rounding of the boundary
        close = np.isclose(eta, thr, rtol=0, atol=1e-12)
        assert np.array_equal(f[~close], want[~close])


def test_fairness_only_baseline_meets_the_eod_cap():
    """The non-private EO plug-in (exact threshold on a calibration half of 10,000 rows)
    keeps the population |EOD| near α: within 0.03 (calibration sampling, sd ≈ 0.01)."""
    clf = FairPlugInClassifier(alpha=0.05, feature_bounds=_BIG.feature_bounds, cross_fit=False,
                               random_state=0, constraints="equal_opportunity")
    d = simulate(20_000, rng=1)
    clf.fit(d.X, d.y, sensitive_features=d.A)
    assert abs(_eod(clf)) <= 0.05 + 0.03
    unconstrained = FairPlugInClassifier(alpha=0.99, feature_bounds=_BIG.feature_bounds,
                                         cross_fit=False, random_state=0,
                                         constraints="equal_opportunity")
    unconstrained.fit(d.X, d.y, sensitive_features=d.A)
    assert abs(_eod(unconstrained)) > 0.05  # the constraint binds on this design


# ---------------------------------------------------------------------------- privacy
def _cal_pair(seed, change):
    rng = np.random.default_rng(seed)
    eta = rng.uniform(0.05, 0.95, 120)
    g = (rng.uniform(size=120) < 0.4).astype(np.int8)
    a = OpportunityCalibration(eta, g, 300)
    eta_b, g_b = eta.copy(), g.copy()
    if change == "move":
        eta_b[0] = rng.uniform(0.05, 0.95)
    elif change == "group":
        g_b[0] = 1 - g_b[0]
    else:  # a positive row replaced by a negative one: it leaves the curve
        eta_b, g_b = eta_b[1:], g_b[1:]
    return a, OpportunityCalibration(eta_b, g_b, 300)


@pytest.mark.parametrize("change", ["move", "group", "label"])
def test_eod_threshold_is_epsilon_dp_exactly_given_the_counts(change):
    """Given the released m̃ (hence p̃ and the scores' map), neighbours' threshold laws differ
    by at most e^ε on every piece and at the atom (windowed loss included)."""
    eps, m1, m0 = 0.8, 44.6, 71.2
    for seed in range(8):
        a, b = _cal_pair(seed, change)
        laws = [threshold_law_from_steps(c.steps(m1, m0), m1, m0, 0.05, eps, 0.3, n_cal=300,
                                         window=2.0**-10) for c in (a, b)]
        edges = np.unique(np.concatenate([law.continuous.edges for law in laws]))
        mids = 0.5 * (edges[:-1] + edges[1:])
        ratio = np.log(laws[0].density(mids)) - np.log(laws[1].density(mids))
        assert np.max(np.abs(ratio)) <= eps + 1e-9
        assert abs(math.log(laws[0].p_atom) - math.log(laws[1].p_atom)) <= eps + 1e-9
        # the check's statistic moves by at most Δ = 1/m1 + 1/m0 at every τ
        sa, sb = a.steps(m1, m0), b.steps(m1, m0)
        for tau in np.linspace(-0.3, 0.3, 41):
            assert abs(sa.at(tau) - sb.at(tau)) <= 1 / m1 + 1 / m0 + 1e-12


def test_two_counts_each_get_half_the_count_epsilon(monkeypatch):
    import dpfair.fairclass._opportunity as opp

    seen = []
    orig = opp.noisy_count

    def spy(count, n_public, epsilon, rng):
        seen.append((n_public, epsilon))
        return orig(count, n_public, epsilon, rng)

    monkeypatch.setattr(opp, "noisy_count", spy)
    plan = plan_budget(1.0, 1e-6, cross_fit=False, has_s2=True, check_share=0.35,
                       constraints="equal_opportunity")
    rng = np.random.default_rng(0)
    cal = OpportunityCalibration(rng.uniform(0.1, 0.9, 500),
                                 (rng.uniform(size=500) < 0.5).astype(np.int8), 1000)
    _tau, cert, positive = s2_opportunity(cal, (0.2, 0.0), plan, rng, 0.05)
    assert seen == [(1000, plan.epsilon_count / 2)] * 2
    assert cert is not None and positive.shape == (2,)


def test_ledger_and_totals_under_equal_opportunity():
    d = simulate(6000, rng=3)
    clf = CDPFairClassifier(epsilon=2.0, delta=1e-6, alpha=0.2, feature_bounds=d.feature_bounds,
                            random_state=0, constraints="equal_opportunity")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(d.X, d.y, sensitive_features=d.A)
    labels = [r.label for r in clf.privacy_ledger_.records]
    assert any("positive-label counts" in lab for lab in labels)
    assert any("EOD" in lab for lab in labels)
    assert clf.privacy_spent_.epsilon == pytest.approx(2.0)
    assert clf.budget_plan_.constraints == "equal_opportunity"
    assert clf.constraints_ == "equal_opportunity"
    # Prediction is post-processing: same output twice, and it uses the released p̃.
    p1 = clf.predict_proba(d.X[:100], sensitive_features=d.A[:100])
    p2 = clf.predict_proba(d.X[:100], sensitive_features=d.A[:100])
    assert np.array_equal(p1, p2)
    fold = clf.folds_[0]
    assert fold.positive.shape == (2,) and np.all((fold.positive > 0) & (fold.positive < 1))


# ---------------------------------------------------------------------------- guarantee
def test_certified_eod_cap_holds_in_population():
    """ε = 4, α = 0.1, paper design N = 9000 (planner: min_alpha ≈ 0.06): most fits certify
    and certified fits keep |EOD| ≤ α in the population (exact 1e-6 bounds, 30 fits)."""
    reps, cert, ok = 30, 0, 0
    for r in range(reps):
        d = simulate(9000, rng=70_000 + r)
        clf = CDPFairClassifier(epsilon=4.0, delta=4500.0**-2, alpha=0.1,
                                feature_bounds=d.feature_bounds, random_state=r,
                                constraints="equal_opportunity")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(d.X, d.y, sensitive_features=d.A)
        if clf.certified_:
            cert += 1
            ok += abs(_eod(clf)) <= 0.1
    assert cert >= min_successes(reps, 0.9)
    assert ok >= min_successes(cert, 0.95)


@pytest.mark.slow
def test_certified_eod_cap_sweep():
    """Slow: 200 fits at ε = 1, α = 0.15: P(|EOD| > α and certified) ≤ 0.05 (exact bound)."""
    reps, good = 200, 0
    for r in range(reps):
        d = simulate(9000, rng=80_000 + r)
        clf = CDPFairClassifier(epsilon=1.0, delta=4500.0**-2, alpha=0.15,
                                feature_bounds=d.feature_bounds, random_state=r,
                                constraints="equal_opportunity")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(d.X, d.y, sensitive_features=d.A)
        good += (not clf.certified_) or abs(_eod(clf)) <= 0.15
    assert good >= min_successes(reps, 0.95)


def test_exported_model_carries_the_equal_opportunity_score():
    d = simulate(3000, rng=5)
    clf = CDPFairClassifier(epsilon=2.0, delta=1e-6, alpha=0.3, feature_bounds=d.feature_bounds,
                            random_state=0, constraints="equal_opportunity")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(d.X, d.y, sensitive_features=d.A)
    out = clf.export_released_model()
    assert out["constraints"] == "equal_opportunity"
    assert out["folds"][0]["positive"] == clf.folds_[0].positive.tolist()
    dp = CDPFairClassifier(epsilon=2.0, delta=1e-6, alpha=0.3, feature_bounds=d.feature_bounds,
                           random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        dp.fit(d.X, d.y, sensitive_features=d.A)
    exported = dp.export_released_model()
    assert exported["constraints"] == "demographic_parity"
    assert "positive" not in exported["folds"][0]

"""CDP-Fair's certified threshold rule: margin, accounting, warning, population guarantee.

The statistical tests use a design the project never tuned to (issue 12): two uniform
features, A ~ Bern(0.5), η = sigmoid(4(x₁ − ½) + 1.5(2a − 1)), N = 6000; the population
disparity of every fitted model is measured on 10^5 fresh draws. A correct implementation
keeps P(|DD| > α and certified) ≤ β = 0.05; the count of repetitions that violate it is
compared with an exact binomial bound at false-alarm probability 1e-6 (tests/_stats.py).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

import dpfair
from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._certify import (
    _tail,
    certification_margin,
    normal_laplace_cdf,
)
from tests._stats import min_successes

BOUNDS = [(0.0, 1.0), (0.0, 1.0)]


def unseen(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    eta = 1.0 / (1.0 + np.exp(-(4.0 * (X[:, 0] - 0.5) + 1.5 * (2.0 * A - 1.0))))
    y = (rng.uniform(size=n) < eta).astype(np.int64)
    return X, y, A


_POP = unseen(100_000, np.random.default_rng(424_242))


def _population_dd(clf: CDPFairClassifier) -> float:
    X, _, A = _POP
    p = clf.predict_proba(X, sensitive_features=A)[:, 1]
    return float(p[A == 1].mean() - p[A == 0].mean())


def _run(eps: float, alpha: float, rep: int) -> tuple[float, bool]:
    X, y, A = unseen(6000, np.random.default_rng(77_000 + rep))
    clf = CDPFairClassifier(
        epsilon=eps, delta=3000.0**-2, alpha=alpha, feature_bounds=BOUNDS, random_state=rep
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is not None
    return _population_dd(clf), bool(clf.certified_)


# ---------------------------------------------------------------------------- margin
def test_normal_laplace_cdf_matches_monte_carlo():
    rng = np.random.default_rng(1)
    s, b = 0.02, 0.01
    x = s * rng.standard_normal(400_000) + rng.laplace(0.0, b, 400_000)
    for q in (-0.06, -0.02, 0.0, 0.03):
        # 400,000 draws: binomial sd of the share ≤ 0.0008; 6 sd.
        assert normal_laplace_cdf(q, s, b) == pytest.approx(np.mean(x <= q), abs=0.005)


def test_margin_solves_its_tail_equation_and_shrinks_with_budget():
    margins = []
    for eps in (0.5, 1.0, 4.0, 50.0):
        t = certification_margin(
            1500.0, 1500.0, epsilon_count=0.25 * eps, epsilon_check=0.35 * eps,
            fail_prob_side=0.025,
        )
        margins.append(t)
    assert all(a > b for a, b in itertools.pairwise(margins))
    # ε → ∞: only the sampling part, z_{0.02475} · sqrt((1/1500 + 1/1500)/4) ≈ 0.0360.
    assert margins[-1] == pytest.approx(1.964 * 0.5 * np.sqrt(2 / 1500), rel=0.03)
    s = 0.5 * np.sqrt(2 / 1500)
    assert _tail(0.04, s, 0.0, 0.0) == pytest.approx(float(stats.norm.cdf(-0.04 / s)), rel=1e-9)


def test_margin_tail_includes_denominator_noise_monte_carlo():
    rng = np.random.default_rng(2)
    s, bw, bv = 0.018, 0.004, 0.005
    n = 400_000
    x = s * rng.standard_normal(n) + rng.laplace(0.0, bw, n) - bv * np.maximum(
        rng.laplace(0.0, 1.0, n), 0.0
    )
    for t in (0.02, 0.04):
        assert _tail(t, s, bw, bv) == pytest.approx(np.mean(x <= -t), abs=0.004)


# ---------------------------------------------------------------------------- API
def test_warning_class_is_exported_user_warning():
    assert issubclass(dpfair.UncertifiedFairnessWarning, UserWarning)
    assert "UncertifiedFairnessWarning" in dpfair.__all__


def test_uncertified_fit_warns_and_says_so():
    X, y, A = unseen(2000, np.random.default_rng(3))
    clf = CDPFairClassifier(epsilon=0.5, delta=1e-6, alpha=0.02, feature_bounds=BOUNDS,
                            random_state=0)
    with pytest.warns(UncertifiedFairnessWarning, match="NOT certified"):
        clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is False
    (cert,) = clf.certificates_
    assert not cert.certified and cert.margin > 0.02
    out = clf.export_released_model()
    assert out["certified"] is False and out["certificates"][0]["margin"] == cert.margin


def test_certified_fit_no_warning_and_ledger_has_the_check():
    X, y, A = unseen(6000, np.random.default_rng(4))
    # A fixed seed whose fit certifies (about 9 in 10 seeds do here: 18 of seeds 0–19 after
    # the exact samplers of issue 11 changed the draw streams; the certification *rate* is
    # tested with exact binomial bounds elsewhere in this file).
    clf = CDPFairClassifier(epsilon=4.0, delta=1e-6, alpha=0.2, feature_bounds=BOUNDS,
                            random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is True
    assert clf.tau_.size == 1  # default: no cross-fitting under the certified rule
    plan = clf.budget_plan_
    assert plan.epsilon_check == pytest.approx(0.35 * 4.0)
    assert plan.epsilon_count + plan.epsilon_threshold + plan.epsilon_check == pytest.approx(4.0)
    labels = [r.label for r in clf.privacy_ledger_.records]
    assert any("certificate" in lab for lab in labels)
    assert clf.privacy_spent_.epsilon == pytest.approx(4.0)
    by_rows = clf.privacy_ledger_.spent_by_rows
    assert by_rows["half B"].epsilon == pytest.approx(4.0)


def test_certified_with_cross_fit_splits_budget_and_beta():
    X, y, A = unseen(6000, np.random.default_rng(5))
    clf = CDPFairClassifier(epsilon=2.0, delta=1e-6, alpha=0.2, feature_bounds=BOUNDS,
                            cross_fit=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert len(clf.certificates_) == 2
    assert all(c.fail_prob == pytest.approx(0.025) for c in clf.certificates_)
    assert clf.privacy_spent_.epsilon == pytest.approx(2.0)


def test_target_rule_is_the_previous_behaviour():
    X, y, A = unseen(3000, np.random.default_rng(6))
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1, feature_bounds=BOUNDS,
                            threshold_rule="target", random_state=0)
    clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is None and clf.certificates_ is None
    assert clf.tau_.size == 2  # cross-fitting stays the default of the target rule
    assert clf.budget_plan_.epsilon_check == 0.0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"threshold_rule": "paper"}, "threshold_rule"),
        ({"fail_prob": 0.7}, "fail_prob"),
        ({"fail_prob": 0.0}, "fail_prob"),
        ({"check_share": 0.8}, "check_share"),
    ],
)
def test_bad_certification_parameters(kw, match):
    X, y, A = unseen(500, np.random.default_rng(7))
    clf = CDPFairClassifier(feature_bounds=BOUNDS, random_state=0, **kw)
    with pytest.raises(dpfair.InvalidParameterError, match=match):
        clf.fit(X, y, sensitive_features=A)
    assert not hasattr(clf, "folds_")


# ---------------------------------------------------------------------------- guarantee
def test_certified_cap_holds_in_population_unseen_design():
    """30 reps at ε = 1, α = 0.1 on the unseen design (issue 12).

    Success = population |DD| ≤ α or not certified; by the guarantee its probability is
    ≥ 0.95. Measured (benchmarks/fairclass_certified_study.py, 30 reps): 0% above α,
    97% certified; the target rule had 40% above α.
    """
    res = [_run(1.0, 0.1, r) for r in range(30)]
    ok = sum((abs(d) <= 0.1) or not c for d, c in res)
    assert ok >= min_successes(30, 0.95)
    # Most fits are certified here, so the cap holds for the released models as a whole.
    assert sum(abs(d) <= 0.1 for d, _ in res) >= min_successes(30, 0.9)
    assert sum(c for _, c in res) >= min_successes(30, 0.8)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [1.0, 4.0])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_certified_cap_sweep_unseen_design(eps, alpha):
    """Slow: 200 reps per cell; P(|DD| > α and certified) ≤ 0.05 (exact 1e-6 bound)."""
    res = [_run(eps, alpha, 1000 + r) for r in range(200)]
    ok = sum((abs(d) <= alpha) or not c for d, c in res)
    assert ok >= min_successes(200, 0.95)

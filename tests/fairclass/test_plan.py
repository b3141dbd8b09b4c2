"""The certification planner (issue 20, item 1): public numbers in, a checked prediction out.

The prediction is checked on designs it was never tuned on (a kernel score with a non-linear
η, and a linear score with categorical columns and tied scores): fits at
α = 1.5 · ``min_alpha`` must certify in ≥ 90% of cases; the count of certified fits is
compared with an exact binomial bound at false-alarm probability 1e-6 (tests/_stats.py).
The full-size check (200 fits per design) is ``-m slow``; the study with every design is
``benchmarks/fairclass_plan_study.py``.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from dpfair import InvalidParameterError, UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, plan_certification
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._certify import certification_margin
from tests._stats import min_successes


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def wave(n, rng):
    """Kernel design (never used to tune anything): non-linear η, P(A = 1) = 0.4."""
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    eta = _sigmoid(3.0 * np.sin(2 * np.pi * X[:, 0]) + 2.0 * X[:, 1] - 1.0 + (2.0 * A - 1.0))
    return X, (rng.uniform(size=n) < eta).astype(np.int64), A


def categorical(n, rng):
    """Linear design with two categorical columns and an integer one (tied scores)."""
    c1, c2, x = rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(0, 11, n)
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    lin = (np.array([-1.0, 0.0, 0.5, 1.2])[c1] + np.array([0.3, -0.4, 0.0])[c2]
           + 0.25 * (x - 5) + (2 * A - 1))
    y = (rng.uniform(size=n) < _sigmoid(lin)).astype(np.int64)
    return np.column_stack([c1, c2, x]).astype(float), y, A


DESIGNS = {
    "wave": (wave, {"feature_bounds": [(0.0, 1.0)] * 2}),
    "categorical": (categorical, {
        "estimator": "linear", "categories": {0: [0.0, 1.0, 2.0, 3.0], 1: [0.0, 1.0, 2.0]},
        "feature_bounds": [None, None, (0.0, 10.0)]}),
}


def _certified_count(design, eps, alpha, reps, n=6000, seed0=0):
    draw, kw = DESIGNS[design]
    hits = 0
    for r in range(reps):
        X, y, A = draw(n, np.random.default_rng(seed0 + r))
        clf = CDPFairClassifier(epsilon=eps, delta=(n / 2) ** -2.0, alpha=alpha,
                                random_state=seed0 + r, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        hits += bool(clf.certified_)
    return hits


# ---------------------------------------------------------------------------- the plan itself
def test_plan_is_a_function_of_public_numbers():
    a = plan_certification(9000, 1.0, 4500.0**-2, 0.3)
    b = plan_certification(9000, 1.0, 4500.0**-2, 0.3)
    assert a == b
    # The margin is the estimator's margin at the expected denominators and its S2 split.
    split = plan_budget(1.0, 4500.0**-2, cross_fit=False, has_s2=True, check_share=0.35)
    assert (a.epsilon_count, a.epsilon_threshold, a.epsilon_check) == pytest.approx(
        (split.epsilon_count, split.epsilon_threshold, split.epsilon_check))
    t = certification_margin(1350.0, 3150.0, epsilon_count=split.epsilon_count,
                             epsilon_check=split.epsilon_check, fail_prob_side=0.025)
    assert a.margin == pytest.approx(t)
    assert a.certification_probability(a.min_alpha) == pytest.approx(0.9, abs=1e-4)
    assert a.aim(0.2) == pytest.approx(0.2 - a.margin - a.slack)
    out = a.to_dict()
    assert out["min_alpha"] == a.min_alpha and out["margin"] == a.margin


def test_plan_improves_with_data_budget_and_share():
    base = plan_certification(6000, 1.0, 1e-7, 0.3)
    assert plan_certification(20_000, 1.0, 1e-7, 0.3).min_alpha < base.min_alpha
    assert plan_certification(6000, 4.0, 1e-7, 0.3).min_alpha < base.min_alpha
    assert plan_certification(6000, 1.0, 1e-7, 0.5).min_alpha < base.min_alpha
    # Probability rises with α; cross-fitting halves β per fold and needs both folds.
    probs = [base.certification_probability(a) for a in (0.04, 0.06, 0.08, 0.1)]
    assert all(p <= q for p, q in itertools.pairwise(probs))
    assert plan_certification(6000, 1.0, 1e-7, 0.3, cross_fit=True).folds == 2


def test_equal_opportunity_plan_is_stricter():
    dp = plan_certification(9000, 1.0, 1e-7, 0.115, max_group_share=0.62)
    eo = plan_certification(9000, 1.0, 1e-7, 0.115, constraints="equal_opportunity",
                            max_group_share=0.62)
    assert eo.margin > dp.margin  # two noisy counts
    assert eo.constraints == "equal_opportunity"


def test_plan_reports_unreachable():
    plan = plan_certification(200, 0.1, 1e-4, 0.1)
    assert plan.min_alpha == float("inf")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"n": 5}, "n="),
        ({"n": 100.5}, "n="),
        ({"min_group_share": 0.7}, "min_group_share"),
        ({"min_group_share": 0.0}, "min_group_share"),
        ({"fail_prob": 0.6}, "fail_prob"),
        ({"constraints": "parity"}, "constraints"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"target_rate": 1.0}, "target_rate"),
        ({"max_group_share": 0.1}, "max_group_share"),
    ],
)
def test_plan_rejects_bad_input(kw, match):
    args = {"n": 6000, "epsilon": 1.0, "delta": 1e-6, "min_group_share": 0.3, **kw}
    with pytest.raises(InvalidParameterError, match=match):
        plan_certification(**args)


# ---------------------------------------------------------------------------- the check
@pytest.mark.parametrize("design", ["wave", "categorical"])
def test_planned_alpha_certifies_unseen_designs(design):
    """α = 1.5·min_alpha (planned with the design's smaller share 0.4): ≥ 90% certified."""
    plan = plan_certification(6000, 1.0, 3000.0**-2, 0.4)
    alpha = 1.5 * plan.min_alpha
    reps = 24
    assert _certified_count(design, 1.0, alpha, reps) >= min_successes(reps, 0.9)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("design", ["wave", "categorical"])
def test_planned_alpha_certifies_unseen_designs_full(design, eps):
    """Slow: 200 fits per cell at α = 1.5·min_alpha; ≥ 90% certified (exact 1e-6 bound)."""
    plan = plan_certification(6000, eps, 3000.0**-2, 0.4)
    reps = 200
    got = _certified_count(design, eps, 1.5 * plan.min_alpha, reps, seed0=10_000)
    assert got >= min_successes(reps, 0.9)

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
    # At α = 0.2 the fit moves β to τ̂'s side (κ = 0.05): the aim uses that side's margin.
    side = a.side_choice(0.2)
    t_side = certification_margin(1350.0, 3150.0, epsilon_count=split.epsilon_count,
                                  epsilon_check=split.epsilon_check, fail_prob_side=0.0475)
    assert side.side_share == 0.05 and side.margin == pytest.approx(t_side)
    assert t_side < a.margin
    assert a.aim(0.2) == pytest.approx(0.2 - t_side - a.slack)
    assert a.side_choice(a.min_alpha).side_share == 0.5  # near min_alpha: symmetric
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


# ---------------------------------------------------------------------------- sampling margin
def test_sampling_margin_is_the_noise_free_floor():
    """t₀ (no privacy noise) ≤ t at every ε, and α ≤ t₀ never certifies: predicted 0."""
    plans = [plan_certification(6000, eps, 3000.0**-2, 0.3) for eps in (0.5, 1.0, 4.0, 64.0)]
    t0 = plans[0].sampling_margin
    assert all(p.sampling_margin == pytest.approx(t0) for p in plans)
    assert all(p.margin > t0 for p in plans)
    assert all(min(r[1] for r in p.side_margins) > t0 for p in plans)
    assert plans[-1].side_choice(0.2).margin == pytest.approx(t0, rel=0.05)
    # The largest side share is 1 − 0.05 (side allocation): ≈ z_{0.99·0.0475}·
    # sqrt((1/900 + 1/2100)/4) + ¼(1/900 + 1/2100) ≈ 0.034 (was z_{0.99·0.025}: 0.0395)
    assert t0 == pytest.approx(1.6754 * 0.5 * np.sqrt(1 / 900 + 1 / 2100), rel=0.03)
    assert all(p.min_alpha > t0 for p in plans)
    assert all(p.certification_probability(t0) == 0.0 for p in plans)


def test_alpha_below_sampling_margin_never_certifies():
    """A fit at α = t₀ (large ε): the cap α − t < 0, so no certificate (deterministic)."""
    plan = plan_certification(6000, 8.0, 3000.0**-2, 0.4)
    for r in range(3):
        X, y, A = wave(6000, np.random.default_rng(900 + r))
        clf = CDPFairClassifier(epsilon=8.0, delta=3000.0**-2, alpha=plan.sampling_margin,
                                random_state=r, feature_bounds=[(0.0, 1.0)] * 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        assert clf.certified_ is False


# ---------------------------------------------------------------------------- calibration share
def test_calibration_share_split_sizes_and_default_unchanged():
    from dpfair.fairclass._split import calibration_size, draw_split

    a = draw_split("permutation", np.random.default_rng(4), 1001)
    b = draw_split("permutation", np.random.default_rng(4), 1001, 0.5)
    assert a.half_sizes(1001) == b.half_sizes(1001) == (500, 501)
    assert np.array_equal(a.rows(1001)[0], b.rows(1001)[0])
    c = draw_split("permutation", np.random.default_rng(4), 6000, 0.7)
    assert c.half_sizes(6000) == (1800, 4200) and calibration_size(6000, 0.7) == 4200
    tr, cal = c.rows(6000)
    assert tr.size == 1800 and cal.size == 4200 and np.intersect1d(tr, cal).size == 0
    assert np.array_equal(np.flatnonzero(c.labels(0, 6000) == 1), cal)
    # the position split (out of core) takes the share through its hash cut
    pos = draw_split("position", np.random.default_rng(4), 6000, 0.7)
    assert abs(pos.half_sizes(6000)[1] - 4200) < 10 * (6000 * 0.21) ** 0.5
    with pytest.raises(InvalidParameterError, match="calibration_share"):
        draw_split("position", np.random.default_rng(4), 6000, 1.0)


def test_calibration_share_plan_and_fit_agree():
    """The plan's denominators follow the share; the fit's calibration half has that size
    and its ledger is the same budget (the split is data-independent, sizes public)."""
    p5 = plan_certification(6000, 1.0, 3000.0**-2, 0.4)
    p7 = plan_certification(6000, 1.0, 3000.0**-2, 0.4, calibration_share=0.7)
    assert p7.group_sizes == pytest.approx((0.4 * 4200, 0.6 * 4200))
    assert p7.margin < p5.margin and p7.sampling_margin < p5.sampling_margin
    assert p7.min_alpha < p5.min_alpha and p7.calibration_share == 0.7
    X, y, A = wave(6000, np.random.default_rng(3))
    fits = {}
    for share in (0.5, 0.7):
        clf = CDPFairClassifier(epsilon=1.0, delta=3000.0**-2, alpha=0.1, random_state=1,
                                calibration_share=share, feature_bounds=[(0.0, 1.0)] * 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        fits[share] = clf
    assert fits[0.7].privacy_spent_ == fits[0.5].privacy_spent_
    assert fits[0.7].get_params()["calibration_share"] == 0.7


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"calibration_share": 0.95}, "calibration_share"),
     ({"calibration_share": True}, "calibration_share"),
     ({"calibration_share": 0.7, "cross_fit": True}, "cross_fit"),
     ({"calibration_share": "0.7"}, "calibration_share")],
)
def test_calibration_share_rejected_before_reading_data(kw, match):
    X, y, A = wave(400, np.random.default_rng(0))
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, feature_bounds=[(0.0, 1.0)] * 2, **kw)
    with pytest.raises(InvalidParameterError, match=match):
        clf.fit(X, y, sensitive_features=A)
    with pytest.raises(InvalidParameterError, match="calibration_share"):
        plan_certification(6000, 1.0, 1e-6, 0.3, calibration_share=0.95)
    with pytest.raises(InvalidParameterError, match="cross_fit"):
        plan_certification(6000, 1.0, 1e-6, 0.3, calibration_share=0.7, cross_fit=True)


@pytest.mark.parametrize("design", ["wave", "categorical"])
def test_planned_alpha_certifies_unseen_designs_calibration_share(design):
    """With calibration_share=0.7 the planner's α = 1.5·min_alpha still certifies ≥ 90%."""
    plan = plan_certification(6000, 1.0, 3000.0**-2, 0.4, calibration_share=0.7)
    reps = 16
    draw, kw = DESIGNS[design]
    hits = 0
    for r in range(reps):
        X, y, A = draw(6000, np.random.default_rng(20_000 + r))
        clf = CDPFairClassifier(epsilon=1.0, delta=3000.0**-2, alpha=1.5 * plan.min_alpha,
                                random_state=r, calibration_share=0.7, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        hits += bool(clf.certified_)
    assert hits >= min_successes(reps, 0.9)


def test_auto_calibration_share_is_the_smallest_that_reaches_the_target():
    from dpfair.fairclass._plan import AUTO_SHARES

    # paper's design at N = 6000: α = 0.1 certifies at halves, α = 0.05 needs more rows
    easy = plan_certification(6000, 1.0, 3000.0**-2, 0.3, calibration_share="auto", alpha=0.1)
    assert easy.calibration_share == 0.5
    hard = plan_certification(6000, 1.0, 3000.0**-2, 0.3, calibration_share="auto", alpha=0.05)
    assert hard.calibration_share > 0.5
    if hard.certification_probability(0.05) >= 0.9:
        smaller = [c for c in AUTO_SHARES if c < hard.calibration_share]
        assert all(plan_certification(6000, 1.0, 3000.0**-2, 0.3, calibration_share=c)
                   .certification_probability(0.05) < 0.9 for c in smaller)
    else:
        assert hard.calibration_share == AUTO_SHARES[-1]
    assert plan_certification(6000, 1.0, 3000.0**-2, 0.3, calibration_share="auto",
                              alpha=0.05, cross_fit=True).calibration_share == 0.5
    with pytest.raises(InvalidParameterError, match="alpha"):
        plan_certification(6000, 1.0, 1e-6, 0.3, calibration_share="auto")
    with pytest.raises(InvalidParameterError, match="calibration_share"):
        plan_certification(6000, 1.0, 1e-6, 0.3, calibration_share="big", alpha=0.05)


def test_auto_share_stays_at_halves_where_nothing_certifies():
    """No share reaches the target and none helps: "auto" keeps ½ (a larger calibration
    share would only cost score error); where the rate still rises it takes the largest."""
    from dpfair.fairclass._plan import AUTO_SHARES

    kw = {"constraints": "equal_opportunity", "max_group_share": 0.4,
          "calibration_share": "auto"}
    none = plan_certification(6000, 1.0, 3000.0**-2, 0.1, alpha=0.05, **kw)
    assert none.certification_probability(0.05) < 0.02 and none.calibration_share == 0.5
    rising = plan_certification(6000, 1.0, 3000.0**-2, 0.1, alpha=0.1, **kw)
    assert rising.calibration_share == AUTO_SHARES[-1]
    assert rising.certification_probability(0.1) < 0.9

"""The flat-region aim of the certified rule (issue 20, fifth pass).

Where α − t − g ≤ 0 the ordinary aim is 0; :func:`~dpfair.fairclass._certify.flat_aim`
raises it while the predicted pass probability p(a) stays ≥ min(p(0), max(0.9,
1 − 2(1 − p(0)))), at most to α − t − floor. Regression tests of the rule, of where it is
(not) used, and of the planner's consistency with it. The guarantee is untouched (the aim is
public; the check certifies whatever τ̂ is drawn): ``tests/attacks/test_today4_rate_*.py``
and ``tests/fairclass/test_certified_sides.py`` run the pipeline with it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.fairclass import _pipeline as pipeline
from dpfair.fairclass import plan_certification
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._certify import (
    AIM_RISE,
    PLAN_RATE,
    TIE_SLACK,
    aim_scales,
    aim_slack,
    certified_target,
    flat_aim,
    pass_probability,
    side_margins,
)
from dpfair.fairclass._pipeline import CalibrationScores, s2_threshold

BETA = 0.05
#: The paper's design at N = 6000, calibration share 0.75 (the planner's share at α = 0.05):
#: expected calibration denominators 0.3·4500, 0.7·4500.
M1, M0 = 1350.0, 3150.0
PLAN = plan_budget(1.0, 3000.0**-2, cross_fit=False, has_s2=True, check_share=0.35)
KW = {"epsilon_count": PLAN.epsilon_count, "epsilon_check": PLAN.epsilon_check}


def _scales(m1: float = M1, m0: float = M0) -> tuple[float, float]:
    return aim_scales(m1, m0, epsilon_threshold=PLAN.epsilon_threshold,
                      epsilon_check=PLAN.epsilon_check)


def _level(p0: float) -> float:
    return min(p0, max(PLAN_RATE, 1.0 - AIM_RISE * (1.0 - p0)))


def test_flat_aim_spends_down_to_the_level_at_alpha_005():
    t, t_o = side_margins(M1, M0, fail_prob=BETA, side_share=0.5, **KW)
    b_v, b_w = _scales()
    alpha = 0.05
    assert alpha - t - aim_slack(b_v, b_w) < 0  # the ordinary aim is 0 here
    a = flat_aim(alpha, t, t_o, b_v, b_w)
    p0 = pass_probability(alpha, t, 0.0, b_v, b_w, t_o)
    assert p0 > PLAN_RATE  # the planner's share reaches its target with aim 0
    level = _level(p0)
    hi = alpha - t - TIE_SLACK
    assert 0.0 < a <= hi
    assert pass_probability(alpha, t, a, b_v, b_w, t_o) >= level
    if a < hi:  # the largest such aim: a little more falls below the level
        assert pass_probability(alpha, t, a + 1e-7, b_v, b_w, t_o) < level
    # p is decreasing on [0, hi] with symmetric margins: p(a) < p(0), and the aim is what
    # certified_target returns with the other side's margin.
    assert pass_probability(alpha, t, a, b_v, b_w, t_o) < p0
    got = certified_target(alpha, t, M1, M0, epsilon_threshold=PLAN.epsilon_threshold,
                           epsilon_check=PLAN.epsilon_check, margin_other=t_o)
    assert got == a
    old = certified_target(alpha, t, M1, M0, epsilon_threshold=PLAN.epsilon_threshold,
                           epsilon_check=PLAN.epsilon_check)
    assert old == 0.0


def test_flat_aim_keeps_the_ordinary_aim_at_alpha_01():
    """Large α: 2(1 − p(0)) < AIM_FAIL, the ordinary α − t − g is larger and kept."""
    b_v, b_w = _scales(900.0, 2100.0)
    for kappa in (0.05, 0.5):
        t, t_o = side_margins(900.0, 2100.0, fail_prob=BETA, side_share=kappa, **KW)
        kw = {"epsilon_threshold": PLAN.epsilon_threshold, "epsilon_check": PLAN.epsilon_check}
        new = certified_target(0.1, t, 900.0, 2100.0, margin_other=t_o, **kw)
        old = certified_target(0.1, t, 900.0, 2100.0, **kw)
        assert new == old > 0.0
        assert flat_aim(0.1, t, t_o, b_v, b_w) < old


def test_flat_aim_is_zero_without_room():
    b_v, b_w = _scales(900.0, 2100.0)
    t, t_o = side_margins(900.0, 2100.0, fail_prob=BETA, side_share=0.5, **KW)
    # α − t − floor ≤ 0: no aim at all.
    assert flat_aim(t + TIE_SLACK, t, t_o, b_v, b_w) == 0.0
    assert flat_aim(t + 0.5 * TIE_SLACK, t, t_o, b_v, b_w) == 0.0
    # Room above the floor, but p(0) below the rate: nothing is spent (symmetric margins;
    # halves of N = 6000 at α = 0.058, below the planner's min_alpha 0.0655).
    alpha = 0.058
    assert alpha - t - TIE_SLACK > 0
    assert pass_probability(alpha, t, 0.0, b_v, b_w, t_o) < PLAN_RATE
    assert flat_aim(alpha, t, t_o, b_v, b_w) == 0.0
    # With a lower rate the factor rule binds instead: 1 − p(a) ≤ 2(1 − p(0)).
    a = flat_aim(alpha, t, t_o, b_v, b_w, rate=0.0)
    p0 = pass_probability(alpha, t, 0.0, b_v, b_w, t_o)
    assert a > 0.0
    assert 1.0 - pass_probability(alpha, t, a, b_v, b_w, t_o) <= 2.0 * (1.0 - p0) + 1e-12


def test_flat_aim_with_asymmetric_margins_is_measured_from_the_best_aim():
    """κ < ½: t_o > t, p rises first; the level is set by p* = max p on [0, hi], not p(0),
    and the aim is the right end of {p ≥ level} (checked on a grid)."""
    b_v, b_w = _scales()
    for kappa, alpha in ((0.25, 0.055), (0.25, 0.05), (0.05, 0.05)):
        t, t_o = side_margins(M1, M0, fail_prob=BETA, side_share=kappa, **KW)
        a = flat_aim(alpha, t, t_o, b_v, b_w)
        hi = alpha - t - TIE_SLACK
        grid = np.linspace(0.0, hi, 4001)
        p = np.array([pass_probability(alpha, t, x, b_v, b_w, t_o) for x in grid])
        best = float(p.max())
        assert best > p[0]  # p rises first
        level = _level(best)
        ok = grid[p >= level - 1e-9]
        assert a == pytest.approx(float(ok.max()), abs=hi / 4000 + 1e-9)
        assert pass_probability(alpha, t, a, b_v, b_w, t_o) >= level - 1e-9
        # never below what the ordinary aim predicts
        g = aim_slack(b_v, b_w)
        ordinary = max(alpha - t - g, 0.0)
        assert pass_probability(alpha, t, max(a, ordinary), b_v, b_w, t_o) >= min(
            pass_probability(alpha, t, ordinary, b_v, b_w, t_o), PLAN_RATE) - 1e-9


def test_planner_predicts_the_flat_aim_and_keeps_its_share():
    """The paper's design (N = 9000) at α = 0.05: aim > 0, predicted rate still ≥ 0.9 at the
    same planned share (½); the equal-opportunity plan keeps the ordinary aim."""
    plan = plan_certification(9000, 1.0, 4500.0**-2, 0.3, calibration_share="auto",
                              alpha=0.05)
    assert plan.calibration_share == 0.5
    choice = plan.side_choice(0.05)
    assert choice.aim > 0.0
    assert choice.probability >= PLAN_RATE
    assert plan.aim(0.05) == choice.aim
    eo = plan_certification(9000, 1.0, 4500.0**-2, 0.3, constraints="equal_opportunity")
    c = eo.side_choice(0.2)
    assert c.aim == max(0.2 - c.margin - eo.slack, 0.0)


def test_pipeline_passes_the_other_margin(monkeypatch):
    """s2_threshold (demographic parity) aims with the flat-region rule: the target is
    certified_target with margin_other = the other side's margin."""
    seen = []
    real = pipeline.certified_target

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append((kwargs.get("margin_other"), out))
        return out

    monkeypatch.setattr(pipeline, "certified_target", spy)
    rng = np.random.default_rng(3)
    n1, n0 = 1350, 3150
    z = np.concatenate([rng.normal(0.3, 0.3, n1), rng.normal(-0.1, 0.3, n0)])
    a = np.concatenate([np.ones(n1, np.int8), np.zeros(n0, np.int8)])
    _tau, cert = s2_threshold(CalibrationScores(z, a), np.array([0.7, 0.3]), (0.05, 0.0),
                              PLAN, np.random.default_rng(5), BETA)
    assert cert is not None
    (other, target), = seen
    assert math.isfinite(other) and other >= cert.margin
    if cert.side > 0:
        assert other == cert.margin_lower
    elif cert.side < 0:
        assert other == cert.margin_upper
    assert cert.target == target


@pytest.mark.parametrize(
    ("n", "share", "planned"),
    [(9000, 0.3, 0.5), (6000, 0.3, 0.75), (6000, 0.5, 0.65), (6000, 0.4, 0.65)],
)
def test_planned_share_is_kept_and_the_rate_reached(n, share, planned):
    """The study's designs (paper, paper6k, unseen, wave/categorical) at ε = 1, α = 0.05:
    the flat-region aim keeps the planner's share of the fourth pass, and the side choice's
    tolerance does not take the predicted rate below the planner's target again."""
    plan = plan_certification(n, 1.0, (n / 2) ** -2.0, share, calibration_share="auto",
                              alpha=0.05)
    assert plan.calibration_share == planned
    choice = plan.side_choice(0.05)
    assert choice.probability >= PLAN_RATE
    assert choice.aim > 0.0


@pytest.mark.parametrize(("n", "share"), [(9000, 0.3), (6000, 0.5), (6000, 0.4)])
def test_min_alpha_is_the_first_alpha_reaching_the_rate(n, share):
    """With the flat-region aim the predicted rate equals the target on a range of α above
    the crossing; ``min_alpha`` is its left end (bisection on rate ≥ target)."""
    plan = plan_certification(n, 1.0, (n / 2) ** -2.0, share)
    a = plan.min_alpha
    assert plan.certification_probability(a) >= plan.target_rate
    assert plan.certification_probability(a - 1e-6) < plan.target_rate
    assert plan.certification_probability(a + 2e-4) >= plan.target_rate

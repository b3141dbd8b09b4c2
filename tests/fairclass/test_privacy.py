"""Privacy plumbing: sensitivities, noise scales, budget split, ledger totals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpfair.fairclass._pipeline as _pipeline
from dpfair import BudgetExceededError
from dpfair.fairclass import (
    CDPFairClassifier,
    PrivacyLedger,
    PrivatePlugInClassifier,
    plan_budget,
)
from dpfair.fairclass._budget import KERNEL_SUM_RKHS_SENSITIVITY
from dpfair.fairclass._model import ReleasedFold, make_grid, release_s1
from dpfair.fairclass.datasets import simulate
from dpfair.mechanisms import analytic_gaussian_delta, analytic_gaussian_sigma
from dpfair.mechanisms.gaussian_process import GaussianProcessMechanism
from dpfair.privacy import Budget
from tests._stats import FAIL_PROB


def _cell_weights(grid, x, a, y):
    """Binned weights of one record in the 4-cell layout [..., a, y]."""
    out = np.zeros((*grid.shape, 2, 2))
    out[..., a, y] = grid.linear_binning(x[None, :])
    return out


def _rkhs_sq(grid, w):
    return sum(grid.rkhs_norm_sq(w[..., a, y]) for a in (0, 1) for y in (0, 1))


def test_kernel_sum_rkhs_sensitivity_is_sqrt2():
    """‖ΔF‖²_H ≤ 2 for random neighbours, attained (≈ 2) for a group change far apart."""
    grid = make_grid(2, 0.15)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(400):
        x, x2 = rng.random(2), rng.random(2)
        a, a2, y, y2 = rng.integers(0, 2, 4)
        diff = _cell_weights(grid, x, a, y) - _cell_weights(grid, x2, a2, y2)
        worst = max(worst, _rkhs_sq(grid, diff))
    assert worst <= 2.0 + 1e-9
    far = _cell_weights(grid, np.array([0.0, 0.0]), 1, 1) - _cell_weights(
        grid, np.array([1.0, 1.0]), 0, 1
    )
    assert _rkhs_sq(grid, far) == pytest.approx(2.0, abs=1e-6)
    assert KERNEL_SUM_RKHS_SENSITIVITY == pytest.approx(math.sqrt(2))


def test_one_record_bump_has_norm_at_most_one():
    grid = make_grid(3, 0.2)
    rng = np.random.default_rng(1)
    for _ in range(50):
        w = grid.linear_binning(rng.random((1, 3)))
        assert grid.rkhs_norm_sq(w) <= 1.0 + 1e-12


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("cross_fit", [False, True])
def test_plan_noise_scales_match_derivation(eps, cross_fit):
    delta = 1e-7
    plan = plan_budget(eps, delta, cross_fit=cross_fit, has_s2=True)
    eps1 = eps * (0.75 if cross_fit else 1.0)
    # calibrated at δ(1 − 2^-40): room for the discrete Gaussian's lattice slack
    # (mechanisms/discrete_gaussian.py)
    mu1 = 1.0 / analytic_gaussian_sigma(eps1, delta * (1.0 - 2.0**-40), 1.0)
    assert plan.mu_s1 == pytest.approx(mu1, rel=1e-12)
    assert plan.sigma_count == pytest.approx(1.0 / (mu1 * math.sqrt(0.05)), rel=1e-12)
    assert plan.sigma_function == pytest.approx(math.sqrt(2) / (mu1 * math.sqrt(0.95)), rel=1e-12)
    mu_sq = 1 / plan.sigma_count**2 + 2 / plan.sigma_function**2
    assert mu_sq == pytest.approx(mu1**2, rel=1e-12)
    # the composed S1 Gaussian meets (eps1, delta) exactly
    assert analytic_gaussian_delta(1 / math.sqrt(mu_sq), 1.0, eps1) <= delta * (1 + 1e-9)
    eps2 = eps - eps1 if cross_fit else eps
    assert plan.epsilon_count == pytest.approx(0.25 * eps2)
    assert plan.epsilon_threshold == pytest.approx(0.75 * eps2)


def test_ledger_totals_are_sums_of_parts():
    data = simulate(3000, 0)
    clf = CDPFairClassifier(
        epsilon=1.2, delta=1e-6, alpha=0.1, feature_bounds=data.feature_bounds, random_state=0
    )
    clf.fit(data.X, data.y, sensitive_features=data.A)
    ledger = clf.privacy_ledger_
    for rows, spent in ledger.spent_by_rows.items():
        charged = [r for r in ledger.records if r.rows == rows and not r.part_of]
        assert spent.epsilon == pytest.approx(sum(r.budget.epsilon for r in charged), rel=1e-12)
        assert spent.delta == pytest.approx(sum(r.budget.delta for r in charged), rel=1e-12)
        # parts of each S1 release add up (in zCDP units) to that release's mu^2/2
        for s1 in (r for r in charged if "S1" in r.label):
            parts = [p for p in ledger.records if p.part_of == s1.label and p.rows == rows]
            rho = sum(p.budget.rho for p in parts)
            assert rho == pytest.approx(clf.budget_plan_.mu_s1**2 / 2, rel=1e-12)
    assert clf.privacy_spent_.epsilon == pytest.approx(1.2, rel=1e-9)
    assert clf.privacy_spent_.delta == pytest.approx(1e-6, rel=1e-9)
    assert Budget.approx(1.2, 1e-6).covers(clf.privacy_spent_)


@pytest.mark.parametrize(
    ("cls", "kwargs", "expected_eps"),
    [
        (CDPFairClassifier, {"cross_fit": False}, 1.0),
        (CDPFairClassifier, {"cross_fit": True}, 1.0),
        (CDPFairClassifier, {"cross_fit": True, "cross_fit_budget": "compose"}, 2.0),
        (PrivatePlugInClassifier, {"cross_fit": True}, 1.0),
        (PrivatePlugInClassifier, {"cross_fit": False}, 1.0),
    ],
)
def test_cross_fitting_is_accounted(cls, kwargs, expected_eps):
    data = simulate(2000, 1)
    extra = {"alpha": 0.1} if cls is CDPFairClassifier else {}
    clf = cls(
        epsilon=1.0,
        delta=1e-6,
        feature_bounds=data.feature_bounds,
        random_state=0,
        **kwargs,
        **extra,
    )
    clf.fit(data.X, data.y, sensitive_features=data.A)
    assert clf.privacy_spent_.epsilon == pytest.approx(expected_eps, rel=1e-9)
    n_fits = 2 if kwargs.get("cross_fit") else 1
    s1 = [r for r in clf.privacy_ledger_.records if "S1 (" in r.label]
    assert len(s1) == n_fits
    if kwargs.get("cross_fit"):
        # each half feeds one S1 and (for CDP-Fair) one S2 release
        assert {r.rows for r in s1} == {"half A", "half B"}


def test_ledger_refuses_overspending():
    ledger = PrivacyLedger(Budget.approx(1.0, 1e-6))
    ledger.charge(Budget.approx(0.8, 1e-6), label="first", rows="half A")
    with pytest.raises(BudgetExceededError):
        ledger.charge(Budget.pure(0.3), label="second", rows="half A")
    # another partition is independent (parallel composition)
    ledger.charge(Budget.pure(1.0), label="other", rows="half B")
    assert ledger.total.epsilon == pytest.approx(1.0)


def test_count_noise_scale_matches_plan(seed):
    """(ñ_1 − n_1)/σ_c over 3000 releases: χ²_3000 bounds at 1e-6 (a 10% scale error fails)."""
    plan = plan_budget(1.0, 1e-6, cross_fit=False, has_s2=True)
    data = simulate(400, 2)
    grid = make_grid(2, 0.3, resolution=1.0)
    mech = GaussianProcessMechanism(plan.sigma_function, KERNEL_SUM_RKHS_SENSITIVITY)
    n, n1 = data.n, int(data.A.sum())
    rng = np.random.default_rng(seed)
    z = []
    for _ in range(3000):
        _, pi = release_s1(
            grid, data.X, data.A, data.y, sigma_count=plan.sigma_count, mechanism=mech, rng=rng
        )
        z.append((pi[1] * n - n1) / plan.sigma_count)
    ss = float(np.sum(np.square(z)))
    lo, hi = stats.chi2.ppf([FAIL_PROB / 2, 1 - FAIL_PROB / 2], len(z))
    assert lo <= ss <= hi


def test_threshold_step_uses_planned_epsilons(monkeypatch, seed):
    """The calibration count gets Laplace(1/ε_c) noise and the exponential mechanism ε_e.

    Σ|m̃_1 − m_1|·ε_c over 2000 fits ~ Gamma(2000, 1): exact bounds at 1e-6.
    """
    seen = []

    def spy(steps, m1, m0, alpha, epsilon, radius, *, n_cal):
        seen.append((n_cal, m1, m0, epsilon))
        return type("Law", (), {"sample": staticmethod(lambda rng: 0.0)})()

    monkeypatch.setattr(_pipeline, "threshold_law_from_steps", spy)
    plan = plan_budget(1.0, 1e-6, cross_fit=False, has_s2=True)
    rng = np.random.default_rng(seed)
    grid = make_grid(2, 0.3, resolution=1.0)
    eta = np.full((*grid.shape, 2), 0.5)
    U = rng.random((500, 2))
    A = (rng.random(500) < 0.4).astype(np.int8)
    pi = np.array([0.6, 0.4])
    cal = _pipeline.CalibrationScores(ReleasedFold(eta=eta, pi=pi, tau=0.0).scores(grid, U, A), A)
    for _ in range(2000):
        _pipeline.s2_threshold(cal, pi, (0.1, 0.0), plan, rng)
    n1 = int(A.sum())
    dev = np.array([abs(m1 - n1) for _, m1, _, _ in seen]) * plan.epsilon_count
    total = float(dev.sum())
    lo, hi = stats.gamma.ppf([FAIL_PROB / 2, 1 - FAIL_PROB / 2], len(dev))
    assert lo <= total <= hi
    assert all(e == pytest.approx(plan.epsilon_threshold) for *_, e in seen)
    assert all(m1 + m0 == pytest.approx(500) for _, m1, m0, _ in seen)

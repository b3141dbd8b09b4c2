"""fit_alpha_path states what publishing the whole path costs (issue 15, item 10).

The models share S1; each α adds an S2 release on the same calibration half. One model is
(ε, δ)-DP; all K of them together are (ε₁ + K·ε₂, δ) with cross-fitting (every half sees
one S1 and K S2's) and (max(ε₁, K·ε₂), δ) without (disjoint halves).
"""

from __future__ import annotations

import pytest

from dpfair.fairclass import CDPFairClassifier, PrivatePlugInClassifier, fit_alpha_path
from dpfair.fairclass.datasets import simulate

ALPHAS = [0.05, 0.1, 0.2]
BOUNDS = [(0, 1), (0, 1)]


@pytest.fixture(scope="module")
def data():
    return simulate(1200, rng=5)


@pytest.mark.parametrize("cross_fit", [True, False])
def test_each_model_carries_the_composed_cost_of_the_path(data, cross_fit):
    eps, delta = 1.0, 1e-5
    est = CDPFairClassifier(epsilon=eps, delta=delta, feature_bounds=BOUNDS,
                            cross_fit=cross_fit, random_state=0)
    models = fit_alpha_path(est, data.X, data.y, sensitive_features=data.A, alphas=ALPHAS)
    plan = models[0].budget_plan_
    eps1, eps2, k = plan.s1.epsilon, plan.s2.epsilon, len(ALPHAS)
    want = eps1 + k * eps2 if cross_fit else max(eps1, k * eps2)
    for m in models:
        assert m.privacy_spent_.epsilon == pytest.approx(eps)  # one model alone
        assert m.path_privacy_spent_.epsilon == pytest.approx(want)
        assert m.path_privacy_spent_.delta == pytest.approx(delta)
        assert m.path_privacy_spent_.epsilon > m.privacy_spent_.epsilon
        ledger = m.path_privacy_ledger_
        charged = [r for r in ledger.records if not r.part_of]
        n_fits = 2 if cross_fit else 1
        assert sum("S1" in r.label for r in charged) == n_fits  # shared, paid once per fit
        assert sum("threshold" in r.label for r in charged) == n_fits * k
    # with cross-fitting (default split s = 0.75): 0.75 + 3 · 0.25 = 1.5
    if cross_fit:
        assert models[0].path_privacy_spent_.epsilon == pytest.approx(1.5)
    else:
        assert models[0].path_privacy_spent_.epsilon == pytest.approx(3.0)


def test_a_single_fit_path_cost_is_its_own_cost(data):
    est = CDPFairClassifier(epsilon=1.0, feature_bounds=BOUNDS, random_state=1)
    fitted = est.set_params(alpha=0.1).fit(data.X, data.y, sensitive_features=data.A)
    assert fitted.path_privacy_spent_.epsilon == pytest.approx(fitted.privacy_spent_.epsilon)
    (only,) = fit_alpha_path(est, data.X, data.y, sensitive_features=data.A, alphas=[0.1])
    assert only.path_privacy_spent_.epsilon == pytest.approx(only.privacy_spent_.epsilon)
    base = PrivatePlugInClassifier(epsilon=1.0, feature_bounds=BOUNDS, random_state=1)
    (m,) = fit_alpha_path(base, data.X, data.y, sensitive_features=data.A, alphas=None)
    assert m.path_privacy_spent_.epsilon == pytest.approx(m.privacy_spent_.epsilon)

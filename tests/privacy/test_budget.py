import math

import numpy as np
import pytest

from dpfair import BudgetExceededError, InvalidParameterError
from dpfair.mechanisms import GaussianMechanism
from dpfair.privacy import (
    Accountant,
    Budget,
    exponential_mechanism_zcdp,
    zcdp_to_approx_epsilon,
)


def test_pure_to_zcdp_is_half_epsilon_squared():
    assert Budget.pure(1.0).to_zcdp().rho == pytest.approx(0.5, rel=1e-15)
    assert Budget.pure(0.3).to_zcdp().rho == pytest.approx(0.045, rel=1e-15)


def test_exponential_mechanism_bounded_range_is_eps_squared_over_8():
    assert exponential_mechanism_zcdp(2.0).rho == pytest.approx(0.5, rel=1e-15)
    # four times smaller than the generic conversion
    assert exponential_mechanism_zcdp(1.3).rho * 4 == pytest.approx(
        Budget.pure(1.3).to_zcdp().rho, rel=1e-15
    )


def test_classic_zcdp_to_approx_known_value():
    # ε = ρ + 2 sqrt(ρ ln(1/δ)); ρ = 0.5, δ = 1e-5
    expected = 0.5 + 2 * math.sqrt(0.5 * math.log(1e5))
    assert zcdp_to_approx_epsilon(0.5, 1e-5, method="classic") == pytest.approx(
        expected, rel=1e-14
    )
    assert expected == pytest.approx(5.2985259, abs=1e-7)


@pytest.mark.parametrize("rho", [0.01, 0.1, 0.5, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_cks_between_exact_gaussian_and_classic(rho, delta):
    cks = zcdp_to_approx_epsilon(rho, delta, method="cks")
    classic = zcdp_to_approx_epsilon(rho, delta, method="classic")
    # exact (ε, δ) curve of the Gaussian mechanism with that ρ: a lower bound for any
    # valid conversion of ρ-zCDP (the Gaussian attains it)
    exact = GaussianMechanism.for_zcdp(rho).privacy_at(delta).epsilon
    assert exact <= cks * (1 + 1e-9)
    assert cks <= classic * (1 + 1e-12)
    # brute-force minimisation of the same CKS expression over a fine grid of orders
    a = 1.0 + np.exp(np.linspace(-12, 12, 200_001))
    grid = a * rho + (np.log(1 / delta) + (a - 1) * np.log1p(-1 / a) - np.log(a)) / (a - 1)
    assert cks == pytest.approx(min(grid.min(), classic), rel=1e-6)


def test_composition_adds():
    assert (Budget.zcdp(0.2) + Budget.zcdp(0.3)).rho == pytest.approx(0.5)
    assert (Budget.pure(1.0) + Budget.pure(0.5)).epsilon == pytest.approx(1.5)
    b = Budget.approx(1.0, 1e-6) + Budget.approx(0.5, 1e-6)
    assert (b.epsilon, b.delta) == pytest.approx((1.5, 2e-6))
    assert (Budget.pure(1.0) + Budget.zcdp(0.1)).rho == pytest.approx(0.6)
    assert sum([Budget.zcdp(0.1)] * 5).rho == pytest.approx(0.5)
    with pytest.raises(InvalidParameterError):
        _ = Budget.approx(1.0, 1e-6) + Budget.zcdp(0.1)


def test_pure_to_approx_and_zcdp_to_approx():
    assert Budget.pure(1.0).to_approx(1e-6).epsilon == 1.0
    b = Budget.zcdp(0.5).to_approx(1e-5, method="classic")
    assert b.epsilon == pytest.approx(5.2985259, abs=1e-7)
    assert b.delta == 1e-5


@pytest.mark.parametrize(
    ("factory", "args", "name"),
    [
        (Budget.pure, (-1.0,), "epsilon"),
        (Budget.zcdp, (float("nan"),), "rho"),
        (Budget.approx, (1.0, 1.0), "delta"),
        (Budget.approx, (1.0, -0.1), "delta"),
    ],
)
def test_bad_budgets_name_the_argument(factory, args, name):
    with pytest.raises(InvalidParameterError, match=name):
        factory(*args)


def test_accountant_refuses_past_the_limit_and_records_nothing():
    acct = Accountant(Budget.zcdp(0.5))
    acct.charge(Budget.zcdp(0.25), label="a")
    acct.charge(Budget.pure(math.sqrt(0.4)), label="b")  # 0.2 zCDP
    assert acct.spent.rho == pytest.approx(0.45)
    assert acct.remaining.rho == pytest.approx(0.05)
    with pytest.raises(BudgetExceededError, match="exceed"):
        acct.charge(Budget.zcdp(0.1), label="c")
    assert [e.label for e in acct.records] == ["a", "b"]
    acct.charge(Budget.zcdp(0.05), label="d")  # exactly to the limit is allowed
    assert acct.spent.rho == pytest.approx(0.5)


def test_accountant_splits_sum_exactly_to_the_limit():
    acct = Accountant(Budget.zcdp(1.0))
    for _ in range(18):
        acct.charge(Budget.zcdp(1.0 / 18))
    assert acct.spent.rho == pytest.approx(1.0, rel=1e-12)
    assert not acct.can_charge(Budget.zcdp(1e-6))


def test_approx_accountant():
    acct = Accountant(Budget.approx(1.0, 1e-5))
    acct.charge(Budget.approx(0.5, 5e-6))
    acct.charge(Budget.pure(0.5))
    with pytest.raises(BudgetExceededError):
        acct.charge(Budget.approx(0.0, 6e-6))

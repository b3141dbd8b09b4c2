"""The one engine: GDP measure, parallel composition over disjoint row sets, audit parts,
and the former accountants (``Accountant``, ``PrivacyLedger``) as names of ``Ledger``."""

from __future__ import annotations

import math

import pytest

from dpfair import BudgetExceededError, IncompatibleBudgetError
from dpfair.privacy import Accountant, Budget, Ledger, LedgerFile, cost_in_measure, gdp_epsilon


def test_gdp_composes_by_mu_squared_and_converts_exactly() -> None:
    led = Ledger(Budget.gdp(1.0))
    led.charge(Budget.gdp(0.6))
    led.charge(Budget.gdp(0.8))  # 0.36 + 0.64 = 1: exactly the cap
    assert led.spent.mu == pytest.approx(1.0, rel=1e-15)
    with pytest.raises(BudgetExceededError):
        led.charge(Budget.gdp(1e-3))
    with pytest.raises(IncompatibleBudgetError):
        led.charge(Budget.pure(0.1))
    assert cost_in_measure(Budget.gdp(1.0), Budget.zcdp(1.0)).rho == 0.5
    with pytest.raises(IncompatibleBudgetError, match="convert_delta"):
        cost_in_measure(Budget.gdp(1.0), Budget.approx(5.0, 1e-5))
    got = cost_in_measure(Budget.gdp(1.0), Budget.approx(5.0, 1e-5), convert_delta=1e-6)
    assert got.epsilon == gdp_epsilon(1.0, 1e-6) and got.delta == 1e-6
    assert Budget.gdp(0.6) + Budget.gdp(0.8) == Budget.gdp(1.0)
    assert str(Budget.gdp(0.5)) == "0.5-GDP"


def test_parallel_composition_over_disjoint_row_sets() -> None:
    led = Ledger(Budget.approx(1.0, 1e-6))
    led.charge(Budget.approx(0.8, 1e-6), rows="half A")
    led.charge(Budget.pure(1.0), rows="half B")  # the other half: its own full budget
    assert led.spent.epsilon == 1.0 and led.spent.delta == 1e-6
    with pytest.raises(BudgetExceededError, match="half A"):
        led.charge(Budget.pure(0.3), rows="half A")
    # a release on every row counts in every set: it must fit in the fullest
    with pytest.raises(BudgetExceededError):
        led.charge(Budget.pure(0.1))
    led2 = Ledger(Budget.zcdp(1.0))
    led2.charge(Budget.zcdp(0.25))
    led2.charge(Budget.zcdp(0.5), rows="A")
    led2.charge(Budget.zcdp(0.25), rows="B")
    assert led2.spent_by_rows == {"A": Budget.zcdp(0.75), "B": Budget.zcdp(0.5)}
    assert led2.spent.rho == 0.75


def test_parts_are_listed_and_charged_zero(tmp_path) -> None:  # type: ignore[no-untyped-def]
    led = Ledger(Budget.approx(1.0, 1e-6))
    led.charge(Budget.approx(0.5, 1e-6), label="S1", rows="half A", noise="N(0, 4)")
    led.note_part(Budget.zcdp(0.1), label="S1 / count", part_of="S1", rows="half A")
    assert led.spent.epsilon == 0.5
    assert [r.part_of for r in led.records] == ["", "S1"]
    assert led.records[1].budget.rho == 0.1
    # the journal keeps rows and noise
    f = LedgerFile.create(tmp_path / "l", Budget.approx(1.0, 1e-6))
    f.charge(Budget.approx(0.5, 1e-6), rows="half A", noise="N(0, 4)")
    f.charge(Budget.approx(0.5, 0.0), rows="half B")
    assert [r.rows for r in f.records] == ["half A", "half B"]
    assert f.spent.epsilon == 0.5 and f.records[0].noise == "N(0, 4)"


def test_former_accountants_are_the_engine() -> None:
    from dpfair.fairclass import LedgerRecord as FairRecord
    from dpfair.fairclass import PrivacyLedger
    from dpfair.privacy import LedgerRecord

    assert Accountant is Ledger and PrivacyLedger is Ledger
    assert FairRecord is LedgerRecord
    assert repr(Budget.zcdp(0.75)) == (
        "Budget(kind='zcdp', epsilon=None, delta=0.0, rho=0.75, note='')"
    )
    assert "mu" not in Budget.pure(1.0).to_dict()
    assert math.isclose(Budget.gdp(2.0).to_zcdp().rho or 0.0, 2.0)


def test_registered_finds_the_ledger_of_the_data(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "d.csv"
    data.write_text("x\n1\n")
    assert LedgerFile.registered(data) is None
    led = LedgerFile.create(tmp_path / "l", Budget.zcdp(1.0), data=data)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(data.read_bytes())
    found = LedgerFile.registered(copy)
    assert found is not None and found.path == led.path

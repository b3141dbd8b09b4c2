"""A Session on a file whose content has a registered ledger charges that ledger (rule 11)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dpfair
from dpfair import LedgerError
from dpfair.privacy import Budget, LedgerFile


def _write(path: Path, n: int = 300) -> Path:
    x = np.random.default_rng(0).uniform(1.0, 99.0, n)
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in x) + "\n")
    return path


def test_a_session_without_ledger_charges_the_registered_one(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.csv")
    reg = LedgerFile.create(tmp_path / "reg.ledger", Budget.zcdp(1.0), data=data)
    s = dpfair.Session(data)  # no budget: the registered ledger's cap
    s.median_ci("x", rho=0.25, bounds=(0.0, 100.0))
    assert reg.spent.rho == pytest.approx(0.25)
    assert isinstance(s.ledger, LedgerFile) and s.ledger.path == reg.path


def test_another_budget_on_registered_data_is_refused_naming_the_ledger(tmp_path: Path
                                                                       ) -> None:
    data = _write(tmp_path / "d.csv")
    LedgerFile.create(tmp_path / "reg.ledger", Budget.zcdp(1.0), data=data)
    with pytest.raises(LedgerError, match=r"reg\.ledger"):
        dpfair.Session(data, budget=Budget.zcdp(5.0))


def test_an_unregistered_file_still_gets_an_in_memory_budget(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.csv")
    s = dpfair.Session(data, budget=Budget.zcdp(1.0))
    s.median_ci("x", rho=0.25, bounds=(0.0, 100.0))
    assert not isinstance(s.ledger, LedgerFile) and s.spent.rho == pytest.approx(0.25)


def test_a_copy_of_the_in_memory_ledger_refunds_nothing() -> None:
    s = dpfair.Session(np.linspace(1.0, 99.0, 300), budget=Budget.zcdp(1.0))
    s.median_ci(rho=0.5, bounds=(0.0, 100.0))
    s.ledger.records.clear()
    assert s.spent.rho == pytest.approx(0.5) and len(s.records) == 1

"""Ledgers: composition across measures, the cap as a filter, single-use keys, the journal
file (torn writes, corruption, data binding) and real concurrent processes."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import stat
from pathlib import Path

import pytest

from dpfair import (
    BudgetExceededError,
    IncompatibleBudgetError,
    InvalidParameterError,
    LedgerError,
    ReleaseReplayError,
)
from dpfair.privacy import Budget, Ledger, LedgerFile, cost_in_measure, zcdp_to_approx_epsilon


# ---------------------------------------------------------------- composition table
def test_pure_into_zcdp_is_eps_squared_over_two() -> None:
    assert cost_in_measure(Budget.pure(1.0), Budget.zcdp(5)).rho == pytest.approx(0.5)


def test_bounded_range_exponential_mechanism_is_eps_squared_over_eight() -> None:
    got = cost_in_measure(Budget.pure(2.0), Budget.zcdp(5), bounded_range=True)
    assert got.rho == pytest.approx(0.5)


def test_approx_into_zcdp_is_refused() -> None:
    with pytest.raises(IncompatibleBudgetError, match="no zCDP equivalent"):
        cost_in_measure(Budget.approx(1.0, 1e-6), Budget.zcdp(5))


def test_zcdp_into_approx_needs_explicit_conversion() -> None:
    cap = Budget.approx(10.0, 1e-5)
    with pytest.raises(IncompatibleBudgetError, match="convert_delta"):
        cost_in_measure(Budget.zcdp(0.5), cap)
    got = cost_in_measure(Budget.zcdp(0.5), cap, convert_delta=1e-6)
    assert got.kind == "approx"
    assert got.delta == 1e-6
    assert got.epsilon == pytest.approx(zcdp_to_approx_epsilon(0.5, 1e-6))


def test_pure_cap_refuses_other_measures() -> None:
    with pytest.raises(IncompatibleBudgetError):
        cost_in_measure(Budget.zcdp(0.1), Budget.pure(1.0))
    assert cost_in_measure(Budget.pure(0.3), Budget.pure(1.0)).epsilon == 0.3


# ---------------------------------------------------------------- in-memory ledger
def test_ledger_refuses_past_cap_and_records_nothing() -> None:
    led = Ledger(Budget.zcdp(1.0))
    for _ in range(4):
        led.charge(Budget.zcdp(0.25), label="median_ci")
    with pytest.raises(BudgetExceededError, match="remains"):
        led.charge(Budget.zcdp(1e-3), label="median_ci")
    assert len(led.records) == 4
    assert led.spent.rho == pytest.approx(1.0)
    assert led.remaining.rho == pytest.approx(0.0)


def test_ledger_mixed_measures_in_approx_cap() -> None:
    led = Ledger(Budget.approx(3.0, 1e-5), convert_delta=1e-6)
    led.charge(Budget.approx(1.0, 1e-6), label="fair")
    led.charge(Budget.pure(0.5), label="facility")
    led.charge(Budget.zcdp(0.01), label="median")
    eps_median = zcdp_to_approx_epsilon(0.01, 1e-6)
    assert led.spent.epsilon == pytest.approx(1.5 + eps_median)
    assert led.spent.delta == pytest.approx(2e-6)


def test_single_use_key_is_refused_the_second_time() -> None:
    led = Ledger(Budget.zcdp(10))
    led.charge(Budget.zcdp(0.1), key="fdp/run=r1/round=1")
    with pytest.raises(ReleaseReplayError, match="already made"):
        led.charge(Budget.zcdp(0.1), key="fdp/run=r1/round=1")
    assert len(led.records) == 1


@pytest.mark.parametrize(
    "bad", [Budget.approx(1.0, 0.0), "1.0", None, 1.0]
)
def test_bad_caps(bad: object) -> None:
    with pytest.raises(InvalidParameterError):
        Ledger(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_negative_or_nan_budget(value: float) -> None:
    with pytest.raises(InvalidParameterError):
        Budget.zcdp(value)


# ---------------------------------------------------------------- the journal file
@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    p = tmp_path / "data.csv"
    p.write_text("x\n1\n2\n3\n")
    return p


def test_file_roundtrip_mode_and_no_overwrite(tmp_path: Path, data_file: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data_file)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    led.charge(Budget.zcdp(0.3), label="median_ci", params={"alpha": 0.05})
    again = LedgerFile.open(path)
    assert again.spent.rho == pytest.approx(0.3)
    assert again.records[0].params == {"alpha": 0.05}
    with pytest.raises(InvalidParameterError, match="never overwritten"):
        LedgerFile.create(path, Budget.zcdp(9.0))
    assert LedgerFile.open(path).cap.rho == 1.0


def test_file_refuses_other_data(tmp_path: Path, data_file: Path) -> None:
    led = LedgerFile.create(tmp_path / "l", Budget.zcdp(1.0), data=data_file)
    led.check_data(data_file)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(data_file.read_bytes())
    led.check_data(copy)  # same content: same data set
    other = tmp_path / "other.csv"
    other.write_text("x\n1\n2\n4\n")
    with pytest.raises(LedgerError, match="bound to"):
        led.check_data(other)
    data_file.write_text("x\n1\n2\n3\n4\n")  # the bound file changed under the ledger
    with pytest.raises(LedgerError, match="bound to"):
        led.check_data(data_file)


def test_torn_last_line_is_ignored_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "l"
    led = LedgerFile.create(path, Budget.zcdp(1.0))
    led.charge(Budget.zcdp(0.2), label="a")
    led.charge(Budget.zcdp(0.2), label="b")
    with open(path, "ab") as fh:  # a crash in the middle of the third append
        fh.write(b'{"seq": 3, "label": "c", "cost": {"ki')
    assert [r.label for r in LedgerFile.open(path).records] == ["a", "b"]
    led.charge(Budget.zcdp(0.1), label="d")
    assert [r.label for r in LedgerFile.open(path).records] == ["a", "b", "d"]
    assert LedgerFile.open(path).spent.rho == pytest.approx(0.5)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda lines: lines[:1] + lines[2:],  # an entry deleted
        lambda lines: [lines[0], lines[2], lines[1]],  # reordered
        lambda lines: [lines[0], lines[1].replace(b"0.4", b"0.1"), lines[2]],  # edited
        lambda lines: [lines[0], b"not json", lines[2]],  # corrupt
    ],
)
def test_tampered_journal_is_refused(tmp_path: Path, mutate) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "l"
    led = LedgerFile.create(path, Budget.zcdp(1.0))
    led.charge(Budget.zcdp(0.4), label="a")
    led.charge(Budget.zcdp(0.4), label="b")
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(mutate(lines)) + b"\n")
    with pytest.raises(LedgerError):
        LedgerFile.open(path)


@pytest.mark.parametrize(
    "content", [b"", b"hello\n", b'{"format": "other"}\n', b'{"format": "dpfair-le', b"[1,2]\n"]
)
def test_not_a_ledger(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "l"
    path.write_bytes(content)
    with pytest.raises(LedgerError):
        LedgerFile.open(path)


def test_missing_ledger(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="ledger init"):
        LedgerFile.open(tmp_path / "nope")


def test_refused_charge_appends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l"
    led = LedgerFile.create(path, Budget.approx(1.0, 1e-6))
    before = path.read_bytes()
    with pytest.raises(BudgetExceededError):
        led.charge(Budget.approx(1.5, 0.0))
    with pytest.raises(IncompatibleBudgetError):
        led.charge(Budget.zcdp(0.1))
    assert path.read_bytes() == before


def _charge_many(path: str, n: int, barrier) -> int:  # type: ignore[no-untyped-def]
    led = LedgerFile.open(path)
    barrier.wait()
    ok = 0
    for _ in range(n):
        try:
            led.charge(Budget.zcdp(0.01), label=f"pid{os.getpid()}")
            ok += 1
        except BudgetExceededError:
            pass
    return ok


def test_concurrent_processes_never_pass_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "l"
    LedgerFile.create(path, Budget.zcdp(0.5))  # room for exactly 50 charges of 0.01
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(4)
        with ctx.Pool(4) as pool:
            oks = pool.starmap(_charge_many, [(str(path), 30, barrier)] * 4)
    led = LedgerFile.open(path)
    assert sum(oks) == 50 == len(led.records)
    assert led.spent.rho == pytest.approx(0.5)
    assert len({r.label for r in led.records}) >= 2  # they really interleaved
    seqs = [json.loads(line)["seq"] for line in path.read_text().splitlines()[1:]]
    assert seqs == list(range(1, 51))

"""Ledgers that cannot be rolled back quietly (issue 23, item 5), written as the attacker.

Each attack is what an analyst with write access to the ledger file, but not to the other
user's or the state directory's records, can do with ordinary tools: delete the final
newline, restore yesterday's copy, grow another history from an older copy, start a second
ledger for the same data, run an FDP site in a fresh directory. Each of these refunded
budget before this change; each is refused now. Also: a refused site cap leaves nothing
behind, the state directory is private, and a full disk loses no charge and makes none.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair import BudgetExceededError, LedgerError
from dpfair.privacy import Budget, LedgerFile

runner = CliRunner()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    p = tmp_path / "data.csv"
    p.write_text("x\n" + "\n".join(str(v) for v in range(100)) + "\n")
    return p


def _full(path: Path, data: Path) -> LedgerFile:
    """A ledger with cap ρ = 1, spent to the last bit by four releases of 0.25."""
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data)
    for i in range(4):
        led.charge(Budget.zcdp(0.25), label=f"median_ci #{i + 1}")
    return led


# ----------------------------------------------------------------- the final newline
@pytest.mark.parametrize("fresh_state", [False, True])
def test_deleting_the_final_newline_refunds_nothing(tmp_path: Path, data: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     fresh_state: bool) -> None:
    path = tmp_path / "budget.jsonl"
    _full(path, data)
    raw = path.read_bytes()
    assert raw.endswith(b"}\n")
    path.write_bytes(raw[:-1])  # the attack: one byte, the last line becomes "torn"
    if fresh_state:  # the line counts on its own, even without the high-water mark
        monkeypatch.setenv("DPFAIR_STATE_DIR", str(tmp_path / "elsewhere"))
    led = LedgerFile.open(path)
    assert len(led.records) == 4
    assert led.spent.rho == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError):
        led.charge(Budget.zcdp(0.25), label="the fifth")
    assert path.read_bytes() == raw[:-1]


def test_a_charge_after_a_missing_newline_keeps_both_lines(tmp_path: Path, data: Path) -> None:
    path = tmp_path / "budget.jsonl"
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data)
    led.charge(Budget.zcdp(0.25), label="a")
    path.write_bytes(path.read_bytes()[:-1])
    led.charge(Budget.zcdp(0.25), label="b")
    assert path.read_bytes().endswith(b"\n")
    assert [r.label for r in LedgerFile.open(path).records] == ["a", "b"]
    assert LedgerFile.open(path).spent.rho == pytest.approx(0.5)


# ----------------------------------------------------------------- older copies, forks
def test_restoring_an_older_copy_is_refused(tmp_path: Path, data: Path) -> None:
    path = tmp_path / "budget.jsonl"
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data)
    led.charge(Budget.zcdp(0.25), label="a")
    backup = path.read_bytes()  # yesterday's copy
    led.charge(Budget.zcdp(0.5), label="b")
    led.charge(Budget.zcdp(0.25), label="c")
    path.write_bytes(backup)  # the attack: restore it, 0.75 would be back
    with pytest.raises(LedgerError, match="older copy"):
        LedgerFile.open(path)
    # charging it is refused too, and writes nothing
    with pytest.raises(LedgerError, match="older copy"):
        LedgerFile(path).charge(Budget.zcdp(0.1))
    assert path.read_bytes() == backup


def test_cutting_into_the_last_line_is_refused(tmp_path: Path, data: Path) -> None:
    path = tmp_path / "budget.jsonl"
    _full(path, data)
    raw = path.read_bytes()
    path.write_bytes(raw[:-10])  # the last line now looks like a torn write
    with pytest.raises(LedgerError, match="older copy"):
        LedgerFile.open(path)


def test_a_history_forked_from_an_older_copy_is_refused(tmp_path: Path, data: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "budget.jsonl"
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data)
    led.charge(Budget.zcdp(0.25), label="a")
    backup = path.read_bytes()
    led.charge(Budget.zcdp(0.5), label="b")
    led.charge(Budget.zcdp(0.25), label="c")  # spent: 1.0, three entries
    # The attacker grows another history from the backup, as long as the real one, made
    # of tiny charges (charged through another account's state directory), and puts it in
    # place of the real file: the hash chain is valid, the length is right.
    fork = tmp_path / "fork.jsonl"
    fork.write_bytes(backup)
    real_state = os.environ["DPFAIR_STATE_DIR"]
    monkeypatch.setenv("DPFAIR_STATE_DIR", str(tmp_path / "attacker-state"))
    forked = LedgerFile.open(fork)
    forked.charge(Budget.zcdp(0.001), label="b'")
    forked.charge(Budget.zcdp(0.001), label="c'")
    monkeypatch.setenv("DPFAIR_STATE_DIR", real_state)
    path.write_bytes(fork.read_bytes())
    with pytest.raises(LedgerError, match="forked"):
        LedgerFile.open(path)


# ----------------------------------------------------------------- one ledger per data set
def test_a_second_ledger_init_on_the_same_data_is_refused(tmp_path: Path, data: Path) -> None:
    from dpfair.cli import app

    first = tmp_path / "first.jsonl"
    res = runner.invoke(app, ["ledger", "init", str(first), "--data", str(data), "--rho", "1"])
    assert res.exit_code == 0, res.output
    copy = tmp_path / "renamed-copy.csv"  # the same bytes under another name
    copy.write_bytes(data.read_bytes())
    for target in (data, copy):
        second = tmp_path / f"second-{target.stem}.jsonl"
        res = runner.invoke(app, ["ledger", "init", str(second), "--data", str(target),
                                  "--rho", "1"])
        assert res.exit_code == 2, res.output
        assert str(first.resolve()) in res.output  # names the existing ledger
        assert "already has a ledger" in res.output
        assert not second.exists()
    # deleting the first ledger does not make room for a fresh one either
    first.unlink()
    res = runner.invoke(app, ["ledger", "init", str(tmp_path / "third.jsonl"), "--data",
                              str(data), "--rho", "1"])
    assert res.exit_code == 2 and "missing" in res.output
    # only a deliberate reset does
    res = runner.invoke(app, ["ledger", "forget", str(data), "--yes"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["ledger", "init", str(tmp_path / "third.jsonl"), "--data",
                              str(data), "--rho", "1"])
    assert res.exit_code == 0, res.output


def test_another_ledger_file_for_registered_data_is_refused(tmp_path: Path, data: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    LedgerFile.create(tmp_path / "mine.jsonl", Budget.zcdp(1.0), data=data)
    real_state = os.environ["DPFAIR_STATE_DIR"]
    monkeypatch.setenv("DPFAIR_STATE_DIR", str(tmp_path / "attacker-state"))
    other = LedgerFile.create(tmp_path / "fresh.jsonl", Budget.zcdp(1.0), data=data)
    monkeypatch.setenv("DPFAIR_STATE_DIR", real_state)
    with pytest.raises(LedgerError, match="already have the ledger"):
        other.check_data(data)


def test_forget_needs_yes(tmp_path: Path, data: Path) -> None:
    from dpfair.cli import app
    from dpfair.privacy import forget_data

    LedgerFile.create(tmp_path / "l.jsonl", Budget.zcdp(1.0), data=data)
    res = runner.invoke(app, ["ledger", "forget", str(data)])
    assert res.exit_code == 2
    assert forget_data(data) is not None and forget_data(data) is None


# ----------------------------------------------------------------- the state directory
def test_state_directory_is_private(tmp_path: Path, data: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from dpfair.privacy import state_dir

    base = tmp_path / "state"
    base.mkdir(mode=0o755)
    os.chmod(base, 0o755)  # a directory others can read
    monkeypatch.setenv("DPFAIR_STATE_DIR", str(base))
    led = LedgerFile.create(tmp_path / "l.jsonl", Budget.zcdp(1.0), data=data)
    led.charge(Budget.zcdp(0.1))
    assert state_dir() == base
    dirs = [base, base / "hwm", base / "registry"]
    files = [p for d in dirs for p in d.iterdir() if p.is_file()]
    assert {p.parent.name for p in files} >= {"hwm", "registry", "state"}
    for d in dirs:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith(".tmp")]


def test_a_file_where_the_state_directory_should_be_refuses_the_charge(
        tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted file in place of ``hwm/`` must not let charges skip the high-water mark."""
    base = tmp_path / "state"
    base.mkdir(mode=0o700)
    (base / "hwm").write_text("not a directory")
    monkeypatch.setenv("DPFAIR_STATE_DIR", str(base))
    with pytest.raises(LedgerError, match="state directory"):
        led = LedgerFile.create(tmp_path / "l.jsonl", Budget.zcdp(1.0), data=data)
        led.charge(Budget.zcdp(0.1))


def test_state_directory_default_follows_xdg(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from dpfair.privacy import state_dir

    monkeypatch.delenv("DPFAIR_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir(create=False) == tmp_path / "xdg" / "dpfair"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir(create=False) == tmp_path / "home" / ".local" / "state" / "dpfair"


# ----------------------------------------------------------------- full disk
def test_full_disk_mid_append_charges_nothing_and_loses_nothing(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpfair.privacy import _journal

    path = tmp_path / "l.jsonl"
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data)
    led.charge(Budget.zcdp(0.25), label="a")
    before = path.read_bytes()
    real_write = os.write

    def full_disk(fd: int, buf: bytes) -> int:
        real_write(fd, bytes(buf[: len(buf) // 2]))  # half of the line reaches the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_journal.os, "write", full_disk)
    with pytest.raises(LedgerError, match="nothing was charged"):
        led.charge(Budget.zcdp(0.25), label="b")
    monkeypatch.setattr(_journal.os, "write", real_write)
    assert path.read_bytes() == before
    led.charge(Budget.zcdp(0.25), label="c")
    assert [r.label for r in LedgerFile.open(path).records] == ["a", "c"]


def test_full_state_disk_keeps_the_charge_and_refuses_the_release(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpfair.privacy import _state

    path = tmp_path / "l.jsonl"
    led = LedgerFile.create(path, Budget.zcdp(1.0), data=data)

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_state, "write_bytes_atomic", full)
    with pytest.raises(LedgerError, match="nothing may be released"):
        led.charge(Budget.zcdp(0.25), label="a")
    monkeypatch.undo()
    os.environ["DPFAIR_STATE_DIR"] = str(_state.state_dir(create=False))
    assert LedgerFile.open(path).spent.rho == pytest.approx(0.25)  # the safe side


# ----------------------------------------------------------------- FDP site caps
def _fdp_world(t: Path) -> dict[str, Any]:
    from dpfair.fairclass.datasets import simulate
    from dpfair.fairclass.federated._keys import generate_keypair, load_signer

    (t / "keys").mkdir()
    pub = {p: generate_keypair(t / "keys" / p)[2] for p in ("centre", "h1")}
    d = simulate(600, rng=4)
    np.savetxt(t / "data.csv", np.column_stack([d.X, d.A, d.y]), delimiter=",",
               header="x1,x2,a,y", comments="", fmt="%.17g")
    return {"pub": pub, "centre": load_signer(t / "keys/centre.key", "centre")}


def _setup(t: Path, world: dict[str, Any], name: str, eps: float) -> str:
    from dpfair.fairclass.federated._messages import write_message
    from dpfair.fairclass.federated._protocol import make_protocol

    cfg = make_protocol([("h1", 600, eps, 1e-6)], feature_bounds=[(-4, 4), (-4, 4)],
                        alpha=0.2, keys={"centre": world["pub"]["centre"],
                                         "h1": world["pub"]["h1"]})
    write_message(t / name, cfg.to_envelope(), world["centre"])
    return name


def _site_round1(t: Path, setup: str, run_dir: str,
                 cap: list[str]) -> subprocess.CompletedProcess[str]:
    (t / run_dir).mkdir(exist_ok=True)
    env = dict(os.environ)
    import dpfair  # the same dpfair as this process (the one under test)

    env["PYTHONPATH"] = str(Path(dpfair.__file__).resolve().parents[1]) + os.pathsep + \
        env.get("PYTHONPATH", "")
    args = [sys.executable, "-m", "dpfair.fairclass.federated.cli", "fdp", "site", "round1",
            "data.csv", "--setup", setup, "--site-id", "h1", "--key", "keys/h1.key",
            "--centre-key", "keys/centre.pub", *cap, "--features", "x1,x2", "--target", "y",
            "--sensitive", "a", "--state", f"{run_dir}/state.json", "--out",
            f"{run_dir}/r1.json"]
    return subprocess.run(args, cwd=t, env=env, capture_output=True, text=True, timeout=300)


def test_fdp_site_cap_follows_the_data_not_the_directory(tmp_path: Path) -> None:
    t = tmp_path
    world = _fdp_world(t)
    cap = ["--max-epsilon", "1", "--max-delta", "1e-6"]
    first = _site_round1(t, _setup(t, world, "run1.json", 1.0), "monday", cap)
    assert first.returncode == 0, first.stderr
    # A second run in a new directory on the same data: the cap (1, 1e-6) is spent.
    second = _site_round1(t, _setup(t, world, "run2.json", 1.0), "tuesday", cap)
    assert second.returncode == 2, second.stderr
    assert "remains" in second.stderr
    assert not (t / "tuesday" / "r1.json").exists()
    assert not (t / "tuesday" / "h1.fdp-ledger").exists()
    led = LedgerFile.open(t / "monday" / "h1.fdp-ledger")
    assert len(led.records) == 1 and led.records[0].params["round"] == 1
    assert led.spent.epsilon == pytest.approx(1.0)


def test_fdp_refused_cap_writes_nothing_and_a_corrected_retry_works(tmp_path: Path) -> None:
    t = tmp_path
    world = _fdp_world(t)
    setup = _setup(t, world, "run1.json", 1.0)
    low = _site_round1(t, setup, "run", ["--max-epsilon", "0.5", "--max-delta", "1e-6"])
    assert low.returncode == 2 and "over the site's own cap" in low.stderr
    assert sorted(p.name for p in (t / "run").iterdir()) == []
    registry = Path(os.environ["DPFAIR_STATE_DIR"]) / "registry"
    assert not registry.exists() or not list(registry.iterdir())
    ok = _site_round1(t, setup, "run", ["--max-epsilon", "1", "--max-delta", "1e-6"])
    assert ok.returncode == 0, ok.stderr
    assert LedgerFile.open(t / "run" / "h1.fdp-ledger").spent.epsilon == pytest.approx(1.0)

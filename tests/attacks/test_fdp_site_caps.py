"""An FDP site's own cap through the real CLI: a new directory on the same data, a raised
cap, a refused cap then a corrected retry, and a ledger not bound to the site's data
(issue 23, item 5; THREATS.md rules 4 and 11)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpfair.privacy import Budget, LedgerFile
from tests.attacks._helpers import REPO

CLI = [sys.executable, "-m", "dpfair.fairclass.federated.cli", "fdp"]
N, EPS, DELTA = 600, 1.0, 1e-6


def _fdp(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    t = tmp_path_factory.mktemp("fdp-keys")
    for party in ("centre", "h1", "h2"):
        r = _fdp("keygen", "--out", f"{party}", cwd=t)
        assert r.returncode == 0, r.stderr
    return t


def _setup(t: Path, keys: Path, name: str, eps: float = EPS) -> Path:
    args = ["centre", "setup", "--key", keys / "centre.key"]
    for sid in ("h1", "h2"):
        args += ["--site", f"{sid}:{N}:{eps}:{DELTA}", "--site-key", f"{sid}={keys}/{sid}.pub"]
    args += ["--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1",
             "--alpha", "0.2", "--out", t / name]
    r = _fdp(*args, cwd=t)
    assert r.returncode == 0, r.stderr
    return t / name


def _data(t: Path) -> Path:
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, (N, 2))
    a = rng.integers(0, 2, N)
    y = (rng.uniform(0, 1, N) < 0.2 + 0.6 * x[:, 0]).astype(int)
    p = t / "h1.csv"
    np.savetxt(p, np.column_stack([x, a, y]), delimiter=",", header="x1,x2,a,y",
               comments="", fmt="%.10g")
    return p


def _round1(t: Path, keys: Path, data: Path, setup: Path, workdir: Path, *budget: str
            ) -> subprocess.CompletedProcess[str]:
    workdir.mkdir(exist_ok=True)
    return _fdp("site", "round1", data, "--setup", setup, "--site-id", "h1", "--key",
                keys / "h1.key", "--centre-key", keys / "centre.pub", *budget, "--features",
                "x1,x2", "--target", "y", "--sensitive", "a", "--state",
                workdir / "state.json", "--out", workdir / "r1.json", cwd=workdir)


CAP = ("--max-epsilon", str(EPS), "--max-delta", str(DELTA))


def test_a_new_directory_on_the_same_data_meets_the_same_cap(tmp_path: Path,
                                                            keys: Path) -> None:
    data = _data(tmp_path)
    s1, s2 = _setup(tmp_path, keys, "run1.json"), _setup(tmp_path, keys, "run2.json")
    assert _round1(tmp_path, keys, data, s1, tmp_path / "a", *CAP).returncode == 0
    r = _round1(tmp_path, keys, data, s2, tmp_path / "b", *CAP)
    assert r.returncode == 2, r.stdout
    assert not (tmp_path / "b" / "r1.json").exists()
    # a copy of the data elsewhere: the same bytes, the same journal
    copy = tmp_path / "elsewhere.csv"
    copy.write_bytes(data.read_bytes())
    assert _round1(tmp_path, keys, copy, s2, tmp_path / "c", *CAP).returncode == 2


def test_a_raised_cap_on_the_same_data_is_refused(tmp_path: Path, keys: Path) -> None:
    data = _data(tmp_path)
    s1, s2 = _setup(tmp_path, keys, "run1.json"), _setup(tmp_path, keys, "run2.json")
    assert _round1(tmp_path, keys, data, s1, tmp_path / "a", *CAP).returncode == 0
    r = _round1(tmp_path, keys, data, s2, tmp_path / "b", "--max-epsilon", str(2 * EPS),
                "--max-delta", str(2 * DELTA))
    assert r.returncode == 2 and "cap" in r.stderr, r.stderr


def test_a_refused_cap_then_a_corrected_retry_runs(tmp_path: Path, keys: Path) -> None:
    data = _data(tmp_path)
    s1 = _setup(tmp_path, keys, "run1.json")
    r = _round1(tmp_path, keys, data, s1, tmp_path / "a", "--max-epsilon", str(EPS / 2),
                "--max-delta", str(DELTA))
    assert r.returncode == 2 and "Refused before reading any data" in r.stderr, r.stderr
    assert list((tmp_path / "a").iterdir()) == []
    r = _round1(tmp_path, keys, data, s1, tmp_path / "a", *CAP)
    assert r.returncode == 0, r.stderr


def test_an_unbound_ledger_is_refused_for_a_site_with_a_registered_journal(
        tmp_path: Path, keys: Path) -> None:
    data = _data(tmp_path)
    s1, s2 = _setup(tmp_path, keys, "run1.json"), _setup(tmp_path, keys, "run2.json")
    assert _round1(tmp_path, keys, data, s1, tmp_path / "a", *CAP).returncode == 0
    fresh = tmp_path / "fresh.ledger"
    LedgerFile.create(fresh, Budget.approx(EPS, DELTA))
    r = _round1(tmp_path, keys, data, s2, tmp_path / "b", "--ledger", str(fresh))
    assert r.returncode == 2, "a second full site budget on the same data"

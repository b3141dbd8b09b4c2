"""Shared helpers of the attack tests: run the real CLI as a subprocess, read a ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).with_name("dpfair")


def run(*args: str | os.PathLike[str], cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``dpfair ARGS`` in a subprocess (inherits ``DPFAIR_STATE_DIR`` from the fixture)."""
    full = dict(os.environ)
    full["PYTHONPATH"] = str(REPO / "src") + os.pathsep + full.get("PYTHONPATH", "")
    full.setdefault("NO_COLOR", "1")
    full["COLUMNS"] = "200"
    if env:
        full.update(env)
    cmd = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "dpfair.cli"]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full, timeout=300)


def spent_rho(ledger: Path) -> float:
    """The ρ spent on a zCDP ledger, read from the file itself (no HWM checks)."""
    total = 0.0
    for line in ledger.read_bytes().split(b"\n")[1:]:
        if line.strip():
            total += float(json.loads(line)["charged"]["rho"] or 0.0)
    return total


def n_entries(ledger: Path) -> int:
    return sum(1 for line in ledger.read_bytes().split(b"\n")[1:] if line.strip())


def write_column(path: Path, n: int = 400, seed: int = 0, *, newline: str = "\n",
                 trailing: bool = True) -> list[str]:
    """A one-column CSV ``x`` of n values in (0, 100); returns the value strings."""
    rng = np.random.default_rng(seed)
    vals = [f"{v:.4f}" for v in np.clip(rng.normal(50.0, 10.0, n), 1.0, 99.0)]
    text = newline.join(["x", *vals]) + (newline if trailing else "")
    path.write_bytes(text.encode())
    return vals


def init_ledger(ledger: Path, data: Path, rho: float = 1.0) -> None:
    r = run("ledger", "init", ledger, "--data", data, "--rho", str(rho))
    assert r.returncode == 0, r.stderr


def median(data: Path, ledger: Path | None, rho: float = 0.25, *extra: str
           ) -> subprocess.CompletedProcess[str]:
    args: list[str | os.PathLike[str]] = ["median-ci", data, "--column", "x", "--rho", str(rho),
                                          "--bounds", "0", "100", "--json", *extra]
    if ledger is not None:
        args += ["--ledger", ledger]
    return run(*args)

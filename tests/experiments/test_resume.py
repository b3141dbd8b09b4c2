"""Kill a running study (SIGKILL) and rerun it: it resumes, and the table is the same.

The study runs as a separate process through the real console entry point with 2 loky
worker processes; it is killed once a few chunks are stored, without any chance to clean
up. The rerun must skip the stored (cell, rep) pairs and end with exactly the table of an
uninterrupted run at the same seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dpfair.experiments import run_experiment
from tests.experiments._helpers import assert_tables_equal

SMOKE = "median-smoke"  # 8 cells
REPS = 30
SEED = 11
CHUNK = 4
TOTAL_CHUNKS = 8 * REPS // CHUNK


def _reproduce(out: Path) -> list[str]:
    return [sys.executable, "-c", "from dpfair.cli import main; main()", "reproduce", SMOKE,
            "--reps", str(REPS), "--seed", str(SEED), "--jobs", "2", "--chunk-size",
            str(CHUNK), "--out", str(out)]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_killed_run_resumes_to_the_uninterrupted_table(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    chunks = out / "chunks"
    proc = subprocess.Popen(_reproduce(out), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if chunks.is_dir() and len(list(chunks.glob("part-*.parquet"))) >= 5:
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"finished before it could be killed: {proc.stderr}"
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: no cleanup, workers orphaned
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # then its orphaned loky workers
            os.killpg(proc.pid, signal.SIGKILL)  # (its own session, started by this test)
        if proc.stderr is not None:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    stored = len(list(chunks.glob("part-*.parquet")))
    assert 5 <= stored < TOTAL_CHUNKS, stored
    assert not (out / "results.parquet").exists(), "the killed run never finished"

    rerun = subprocess.run([*_reproduce(out), "--json"], capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stderr == "", "no progress bar or noise when stderr is not a terminal"
    report = json.loads(rerun.stdout)
    assert report["reused"] >= 5 * CHUNK and report["computed"] == 8 * REPS - report["reused"]
    assert report["computed"] > 0

    fresh = run_experiment(SMOKE, reps=REPS, jobs=2, store_dir=tmp_path / "fresh",
                           progress=False, seed=SEED)
    assert_tables_equal(pq.read_table(out / "results.parquet"), fresh.table)

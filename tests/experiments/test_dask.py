"""The Dask backend on real clusters: worker processes, and a scheduler in its own process.

Each study is compared with the same study run through joblib/loky: the tables must be
identical, because every repetition's seed depends only on (seed, cell, rep).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpfair.experiments import run_experiment
from tests.experiments._helpers import assert_tables_equal

dd = pytest.importorskip(
    "dask.distributed", reason="the [dask] extra is not installed: pip install 'dpfair[dask]'"
)

SMOKE = "median-smoke"
REPS = 4
SEED = 5


@pytest.fixture(scope="module")
def loky_result(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("loky")
    return run_experiment(SMOKE, reps=REPS, jobs=2, store_dir=out, progress=False, seed=SEED)


def test_local_cluster_with_worker_processes(loky_result: Any, tmp_path: Path) -> None:
    """A LocalCluster (scheduler + 2 worker processes), reached through its address."""
    with dd.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=None) as cluster, dd.Client(cluster) as client:
        worker_pids = client.run(os.getpid)
        assert len(worker_pids) == 2
        assert os.getpid() not in worker_pids.values(), "workers are separate processes"
        res = run_experiment(SMOKE, reps=REPS, backend="dask", store_dir=tmp_path,
                             scheduler=cluster.scheduler_address, progress=False, seed=SEED,
                             chunk_size=3)
    assert res.backend == "dask" and res.jobs == 2 and res.computed == 8 * REPS
    assert_tables_equal(res.table, loky_result.table)


def test_default_dask_backend_starts_its_own_local_cluster(loky_result: Any,
                                                           tmp_path: Path) -> None:
    res = run_experiment(SMOKE, reps=REPS, jobs=2, backend="dask", store_dir=tmp_path,
                         progress=False, seed=SEED)
    assert res.jobs == 2
    assert_tables_equal(res.table, loky_result.table)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def scheduler_process(tmp_path: Path) -> Iterator[str]:
    """`dask scheduler` and `dask worker` (2 processes) on 127.0.0.1, as a user would run."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", str(port), "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
    ]
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "2",
             "--nthreads", "1", "--no-dashboard", "--local-directory", str(tmp_path / "w")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        ))
        with dd.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:  # a throw-away cluster: end each session started here (nanny + workers) at once
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


def test_cli_against_a_scheduler_in_its_own_process(scheduler_process: str,
                                                    loky_result: Any, tmp_path: Path) -> None:
    """`dpfair reproduce --backend dask --scheduler ADDR`, end to end, in a subprocess."""
    import pyarrow.parquet as pq

    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "from dpfair.cli import main; main()", "reproduce", SMOKE,
         "--reps", str(REPS), "--seed", str(SEED), "--backend", "dask", "--scheduler",
         scheduler_process, "--out", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "backend dask with 2 worker(s)" in " ".join(proc.stdout.split())
    table = pq.read_table(tmp_path / "store" / "results.parquet")
    assert_tables_equal(table, loky_result.table)
    assert time.perf_counter() - started < 300

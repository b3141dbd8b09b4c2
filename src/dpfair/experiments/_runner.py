"""Parallel, resumable execution of a registered experiment.

Seeds. Repetition ``rep`` of cell ``cell`` gets
``SeedSequence(seed, spawn_key=(cell, rep))``, which is exactly
``SeedSequence(seed).spawn(cell + 1)[cell].spawn(rep + 1)[rep]`` (see :func:`rep_seed`).
It depends on nothing else: not on the number of workers, the chunking, the order in which
chunks finish, nor on how many repetitions were requested. So a resumed run, a run with
more workers, and a run extended to more repetitions all reproduce the same rows.

Chunks. The missing (cell, rep) pairs, in (cell, rep) order, are cut into chunks; each
chunk runs in one worker and its rows are written by the parent process as one Parquet file
(atomically). Only the parent touches the store, so remote Dask workers need no shared
file system.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from dpfair._errors import DPFairError, InvalidParameterError
from dpfair.experiments._registry import (
    Experiment,
    RunOne,
    _as_scalar,
    _check_column,
    get_experiment,
)
from dpfair.experiments._store import ResultStore
from dpfair.experiments._summary import summarize

__all__ = [
    "BACKENDS",
    "DEFAULT_OUT",
    "MissingExtraError",
    "RunResult",
    "default_store_dir",
    "rep_seed",
    "run_experiment",
]

#: Execution backends: local worker processes through joblib, or a Dask cluster.
BACKENDS: tuple[str, ...] = ("loky", "dask")

#: Parent directory of the default store directories.
DEFAULT_OUT = Path("out") / "experiments"

_MAX_CHUNK = 500  # repetitions per chunk: bounds the work lost when a run is killed
_CHUNKS_PER_WORKER = 8

DASK_INSTALL_HINT = "pip install 'dpfair[dask]'"

Task = tuple[int, int, dict[str, Any]]  # (cell, rep, params)


class MissingExtraError(DPFairError, ImportError):
    """An optional dependency (an extra of the ``dpfair`` package) is not installed."""


def rep_seed(seed: int, cell: int, rep: int) -> np.random.SeedSequence:
    """The seed of repetition ``rep`` of grid cell ``cell`` in a run with root ``seed``.

    Parameters
    ----------
    seed : int
        Root seed of the run (>= 0).
    cell, rep : int
        Cell index in the experiment's grid and repetition index (both >= 0).

    Returns
    -------
    numpy.random.SeedSequence
        ``SeedSequence(seed, spawn_key=(cell, rep))``, the same sequence as
        ``SeedSequence(seed).spawn(cell + 1)[cell].spawn(rep + 1)[rep]`` but without
        spawning the siblings.
    """
    return np.random.SeedSequence(int(seed), spawn_key=(int(cell), int(rep)))


def default_store_dir(name: str, seed: int) -> Path:
    """``out/experiments/<name>-seed<seed>`` (relative to the working directory)."""
    return DEFAULT_OUT / f"{name}-seed{int(seed)}"


@dataclass(frozen=True)
class RunResult:
    """The outcome of :func:`run_experiment`.

    Attributes
    ----------
    experiment : Experiment
    seed, reps : int
        Root seed and repetitions per cell.
    backend : str
        ``"loky"`` or ``"dask"``.
    jobs : int
        Worker processes used (for a remote scheduler: its workers when the run started).
    store_dir : pathlib.Path
        The result store (``results.parquet`` and ``summary.json`` are in it).
    table : pyarrow.Table
        One row per (cell, rep), ordered by (cell, rep): ``cell``, ``rep``, the grid's
        parameters, then the outputs of ``run_one``.
    summary : list of dict
        Per-cell means with 95% intervals (see :func:`dpfair.experiments.summarize`).
    computed, reused : int
        Repetitions computed by this call, and found already stored.
    elapsed : float
        Wall-clock seconds of this call.
    """

    experiment: Experiment
    seed: int
    reps: int
    backend: str
    jobs: int
    store_dir: Path
    table: pa.Table = field(repr=False)
    summary: list[dict[str, Any]] = field(repr=False)
    computed: int
    reused: int
    elapsed: float

    def to_dict(self) -> dict[str, Any]:
        """Everything but the table, JSON-ready (the table is in ``results.parquet``)."""
        return {
            "experiment": self.experiment.name,
            "description": self.experiment.description,
            "reference": self.experiment.reference,
            "seed": self.seed,
            "reps": self.reps,
            "cells": self.experiment.n_cells,
            "backend": self.backend,
            "jobs": self.jobs,
            "store_dir": str(self.store_dir),
            "results": str(self.store_dir / "results.parquet"),
            "computed": self.computed,
            "reused": self.reused,
            "elapsed_seconds": self.elapsed,
            "summary": self.summary,
        }


# --------------------------------------------------------------------------- worker side
def _run_chunk(run_one: RunOne, name: str, seed: int, tasks: Sequence[Task]) -> list[dict]:
    """Run the repetitions of one chunk; return one row per (cell, rep)."""
    rows: list[dict[str, Any]] = []
    for cell, rep, params in tasks:
        try:
            outputs = run_one(dict(params), rep_seed(seed, cell, rep))
        except Exception as exc:
            exc.add_note(
                f"dpfair.experiments: experiment {name!r}, cell {cell} {params}, repetition "
                f"{rep}, seed {seed}."
            )
            raise
        if not isinstance(outputs, Mapping):
            raise InvalidParameterError(
                f"run_one of {name!r} returned {type(outputs).__name__}: expected a dict of "
                "scalars."
            )
        row: dict[str, Any] = {"cell": cell, "rep": rep, **params}
        for key, value in outputs.items():
            column = _check_column(f"output of {name!r}", key)
            if column in params:
                raise InvalidParameterError(
                    f"run_one of {name!r} returned {column!r}, which is also a grid parameter. "
                    "Rename the output."
                )
            row[column] = _as_scalar(f"output {column!r} of {name!r}", value)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- backends
Mapper = Callable[[Sequence[Sequence[Task]]], Iterator[list[dict[str, Any]]]]


@contextmanager
def _loky_backend(
    jobs: int, run_one: RunOne, name: str, seed: int
) -> Iterator[tuple[int, Mapper]]:
    """joblib with loky worker processes (in-process when ``jobs == 1``)."""
    import joblib

    unordered = tuple(int(p) for p in joblib.__version__.split(".")[:2]) >= (1, 4)

    def run(chunks: Sequence[Sequence[Task]]) -> Iterator[list[dict[str, Any]]]:
        parallel = joblib.Parallel(
            n_jobs=jobs,
            backend="loky",
            return_as="generator_unordered" if unordered else "generator",
            batch_size=1,
            pre_dispatch="2*n_jobs",
        )
        call = joblib.delayed(_run_chunk)
        yield from parallel(call(run_one, name, seed, chunk) for chunk in chunks)

    yield jobs, run


def _import_dask() -> Any:
    try:
        import dask.distributed as dd
    except ImportError as exc:
        raise MissingExtraError(
            "backend='dask' needs the optional dependency dask.distributed, which is not "
            f"installed ({exc}). Install it with: {DASK_INSTALL_HINT}"
        ) from exc
    return dd


@contextmanager
def _dask_backend(
    jobs: int, scheduler: str | None, run_one: RunOne, name: str, seed: int
) -> Iterator[tuple[int, Mapper]]:
    """A Dask cluster: a new local one (``jobs`` worker processes) or ``scheduler``."""
    import logging

    dd = _import_dask()
    cluster = None
    if scheduler is None:
        cluster = dd.LocalCluster(
            n_workers=jobs,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = dd.Client(cluster)
    else:
        try:
            client = dd.Client(scheduler, timeout="15s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InvalidParameterError(
                f"scheduler={scheduler!r}: cannot connect ({exc}). Start a scheduler with "
                "`dask scheduler` and workers with `dask worker ADDRESS` (each with dpfair "
                "installed), then pass its address, e.g. --scheduler tcp://host:8786."
            ) from None
    try:
        workers = len(client.scheduler_info().get("workers", {})) or jobs

        def run(chunks: Sequence[Sequence[Task]]) -> Iterator[list[dict[str, Any]]]:
            futures = [
                client.submit(_run_chunk, run_one, name, seed, list(chunk), pure=False)
                for chunk in chunks
            ]
            try:
                for future in dd.as_completed(futures):
                    yield future.result()
                    future.release()
            finally:
                client.cancel([f for f in futures if not f.done()])

        yield workers, run
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# --------------------------------------------------------------------------- progress
@contextmanager
def _progress(enabled: bool, label: str, total: int, done: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr when enabled and stderr is a terminal; else silent."""
    if not enabled or not sys.stderr.isatty():
        yield lambda k: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("reps"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task(label, total=total, completed=done)
        yield lambda k: bar.advance(task, k)


# --------------------------------------------------------------------------- driver
def _check_jobs(jobs: int | None) -> int:
    if jobs is None:
        import joblib

        return max(1, int(joblib.cpu_count()))  # respects CPU affinity and cgroup limits
    if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise InvalidParameterError(
            f"jobs={jobs!r}: expected a positive number of worker processes (or None for one "
            "per CPU core)."
        )
    return int(jobs)


def _chunk(tasks: Sequence[Task], size: int) -> list[list[Task]]:
    return [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]


def run_experiment(
    name: str | Experiment,
    reps: int | None = None,
    jobs: int | None = None,
    backend: Literal["loky", "dask"] | str = "loky",
    store_dir: str | os.PathLike[str] | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    *,
    seed: int = 0,
    chunk_size: int | None = None,
) -> RunResult:
    """Run (or resume) an experiment in parallel and return its table and summary.

    Parameters
    ----------
    name : str or Experiment
        A registered name (see :func:`list_experiments`) or a specification.
    reps : int, optional
        Repetitions per cell; default the experiment's ``reps``.
    jobs : int, optional
        Worker processes (default: one per CPU core). With ``jobs=1`` and ``"loky"`` the
        repetitions run in this process. Ignored for a remote ``scheduler``.
    backend : {"loky", "dask"}, default="loky"
        ``"loky"``: local processes through joblib. ``"dask"``: a Dask cluster, started
        locally with ``jobs`` worker processes unless ``scheduler`` is given; needs the
        ``[dask]`` extra.
    store_dir : path, optional
        The result store; default ``out/experiments/<name>-seed<seed>``. Repetitions
        already stored there are not recomputed, so rerunning an interrupted call resumes
        it, and a larger ``reps`` extends a finished run.
    scheduler : str, optional
        Address of a running Dask scheduler, e.g. ``"tcp://10.0.0.5:8786"`` (requires
        ``backend="dask"``). Its workers need dpfair (same version) installed; only this
        process writes the store.
    progress : bool, default=True
        Show a progress bar when stderr is a terminal (never when piped).
    seed : int, default=0
        Root seed; see :func:`rep_seed`.
    chunk_size : int, optional
        Repetitions per stored chunk (default: about 8 chunks per worker, at most 500).
        It changes how much work a kill can lose, never the results.

    Returns
    -------
    RunResult
        ``table`` ordered by (cell, rep), identical for every ``jobs``, ``backend``,
        ``chunk_size`` and interruption history at the same ``seed``.

    Raises
    ------
    UnknownExperimentError
        For an unregistered name.
    StoreMismatchError
        If ``store_dir`` holds results of another experiment, grid or seed.
    MissingExtraError
        For ``backend="dask"`` without ``dask[distributed]`` installed.
    """
    started = time.perf_counter()
    experiment = name if isinstance(name, Experiment) else get_experiment(name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameterError(f"seed={seed!r}: expected a non-negative integer.")
    n_reps = experiment.reps if reps is None else reps
    if isinstance(n_reps, bool) or not isinstance(n_reps, (int, np.integer)) or n_reps < 1:
        raise InvalidParameterError(f"reps={reps!r}: expected a positive integer.")
    n_reps = int(n_reps)
    workers = _check_jobs(jobs)
    if backend not in BACKENDS:
        raise InvalidParameterError(
            f"backend={backend!r}: expected one of {', '.join(map(repr, BACKENDS))}."
        )
    if scheduler is not None and backend != "dask":
        raise InvalidParameterError(
            f"scheduler={scheduler!r} is only used with backend='dask' (--backend dask)."
        )
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
        or chunk_size < 1
    ):
        raise InvalidParameterError(f"chunk_size={chunk_size!r}: expected a positive integer.")
    root = Path(store_dir) if store_dir is not None else default_store_dir(experiment.name, seed)
    if backend == "dask":
        _import_dask()  # fail before touching the store

    with ResultStore(root, experiment, int(seed)) as store:
        done = store.done()
        tasks: list[Task] = [
            (c, r, experiment.grid[c])
            for c in range(experiment.n_cells)
            for r in range(n_reps)
            if (c, r) not in done
        ]
        total = experiment.n_cells * n_reps
        reused = total - len(tasks)
        used_workers = workers
        if tasks:
            if backend == "dask":
                ctx = _dask_backend(workers, scheduler, experiment.run_one, experiment.name,
                                    int(seed))
            else:
                ctx = _loky_backend(workers, experiment.run_one, experiment.name, int(seed))
            with ctx as (used_workers, run), _progress(
                progress, experiment.name, total, reused
            ) as advance:
                size = chunk_size or max(
                    1, min(_MAX_CHUNK, math.ceil(len(tasks) / (_CHUNKS_PER_WORKER * used_workers)))
                )
                for rows in run(_chunk(tasks, int(size))):
                    store.write_chunk(rows)
                    advance(len(rows))
        table = store.table(n_reps)
        if table.num_rows != total:  # pragma: no cover - would be a bug in the store
            raise RuntimeError(f"store holds {table.num_rows} of {total} rows after the run")
        summary = summarize(table, experiment)
        store.write_results(table, summary)
    return RunResult(
        experiment=experiment,
        seed=int(seed),
        reps=n_reps,
        backend=str(backend),
        jobs=used_workers,
        store_dir=root,
        table=table,
        summary=summary,
        computed=len(tasks),
        reused=reused,
        elapsed=time.perf_counter() - started,
    )


"""``dpfair reproduce``: run a registered study and print its per-cell summary.

:func:`register` adds the command to the main Typer app (``dpfair.cli``). The command maps
its flags onto :func:`dpfair.experiments.run_experiment` and prints; no statistics here.
Resources are bounded before anything is allocated: ``--reps`` × the study's cells may not
pass :data:`MAX_TOTAL_REPETITIONS`, and ``--jobs`` is clamped to the CPUs and the tasks.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpfair._errors import DPFairError

if TYPE_CHECKING:
    from dpfair.experiments._registry import Experiment
    from dpfair.experiments._runner import RunResult

__all__ = ["MAX_TOTAL_REPETITIONS", "register", "reproduce"]

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
#: A public limit on repetitions × cells of one run (25 times the largest built-in study,
#: median-coverage's 400,000): a larger request is refused before anything is allocated.
MAX_TOTAL_REPETITIONS = 10_000_000


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def bounded_jobs(jobs: int | None, tasks: int) -> int | None:
    """``jobs`` clamped to the CPUs this process may use and to ``tasks`` (None: default)."""
    if jobs is None:
        return None
    return max(1, min(jobs, _cpus(), max(tasks, 1)))


def _fail(message: str, code: int = EXIT_USER_ERROR) -> NoReturn:
    typer.echo(f"dpfair: error: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code)


def _strict(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _strict(value.item())
    return value


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    return str(v)


def _metric_text(stat: dict[str, Any]) -> str:
    mean, low, high = stat["mean"], stat["low"], stat["high"]
    if isinstance(low, float) and math.isnan(low):
        return _num(mean)
    return f"{_num(mean)} [{_num(low)}, {_num(high)}]"


def _list_table(experiments: list[Experiment]) -> Table:
    table = Table(title="Registered experiments (dpfair reproduce NAME)", title_justify="left")
    for col in ("name", "cells", "reps", "description"):
        table.add_column(col, overflow="fold")
    for e in experiments:
        table.add_row(Text(e.name), str(e.n_cells), str(e.reps), Text(e.description))
    return table


def _summary_table(result: RunResult) -> tuple[Table, list[str]]:
    exp = result.experiment
    varying = [k for k in exp.parameters if len({str(c[k]) for c in exp.grid}) > 1]
    fixed = [f"{k}={_num(exp.grid[0][k])}" for k in exp.parameters if k not in varying]
    metrics = [m for m in (result.summary[0] if result.summary else {})
               if isinstance(result.summary[0][m], dict)]
    table = Table(
        title=f"{exp.name}: mean [95% interval] per cell, {result.reps} reps each",
        title_justify="left",
    )
    table.add_column("cell", justify="right")
    for k in varying:
        table.add_column(k)
    for m in metrics:
        table.add_column(m, justify="right", no_wrap=True)
    for rec in result.summary:
        table.add_row(
            str(rec["cell"]),
            *(Text(_num(rec[k])) for k in varying),
            *(Text(_metric_text(rec[m])) for m in metrics),
        )
    notes = [
        exp.description,
        f"Fixed: {', '.join(fixed)}." if fixed else "",
        f"Source: {exp.reference}." if exp.reference else "",
        "Intervals: exact Clopper-Pearson for proportions, Student-t for means.",
        f"Seed {result.seed}; computed {result.computed} repetitions, reused {result.reused} "
        f"from the store; backend {result.backend} with {result.jobs} worker(s); "
        f"{result.elapsed:.1f} s.",
        f"Table: {result.store_dir / 'results.parquet'} (summary.json beside it).",
    ]
    return table, [n for n in notes if n]


def reproduce(
    experiment: Annotated[
        str | None,
        typer.Argument(
            metavar="EXPERIMENT",
            help="Registered experiment name (see --list).",
            show_default=False,
        ),
    ] = None,
    reps: Annotated[
        int | None,
        typer.Option("--reps", min=1, help="Repetitions per cell (default: the "
                     "experiment's, i.e. the paper's counts).", show_default=False),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Worker processes (default: one per CPU "
                     "core; ignored with --scheduler).", show_default=False),
    ] = None,
    backend: Annotated[
        str,
        typer.Option("--backend", "-b", help="loky (local processes via joblib) or dask "
                     "(needs: pip install 'dpfair[dask]')."),
    ] = "loky",
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", metavar="ADDR", help="Address of a running Dask "
                     "scheduler, e.g. tcp://host:8786 (with --backend dask); default: a "
                     "local cluster.", show_default=False),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Result store directory (default: "
                     "out/experiments/ EXPERIMENT-seedSEED). Rerun with the same directory "
                     "to resume an interrupted run.", show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Root seed of the study.")] = 0,
    chunk_size: Annotated[
        int | None,
        typer.Option("--chunk-size", min=1, help="Repetitions per stored chunk (default: "
                     "automatic); changes only how much a kill can lose.",
                     show_default=False),
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="List the registered experiments and exit.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """Run a registered study in parallel, resumably, and print its per-cell summary.

    Each repetition's seed depends only on --seed, the cell and the repetition index, so
    the table does not depend on --jobs or --backend. Rows are appended to Parquet files in
    the store as chunks finish; rerunning an interrupted command resumes it.
    """
    from dpfair.experiments import list_experiments, run_experiment

    try:
        if list_:
            exps = list_experiments()
            if as_json:
                payload = [
                    {"name": e.name, "cells": e.n_cells, "reps": e.reps,
                     "description": e.description, "reference": e.reference}
                    for e in exps
                ]
                typer.echo(json.dumps(payload, indent=2))
            else:
                Console(soft_wrap=False).print(_list_table(exps))
            return
        if experiment is None:
            _fail("EXPERIMENT is missing: give a registered name, e.g. `dpfair reproduce "
                  "median-smoke`, or list them with `dpfair reproduce --list`.")
        from dpfair.experiments import get_experiment

        exp = get_experiment(experiment)
        total = (reps if reps is not None else exp.reps) * exp.n_cells
        if total > MAX_TOTAL_REPETITIONS:
            _fail(f"--reps {reps}: {exp.n_cells} cell(s) x {reps} repetitions = {total} "
                  f"passes the limit of {MAX_TOTAL_REPETITIONS:,} repetitions per run; "
                  "ask for fewer (or run the study in several stores with other --seed).")
        if backend == "loky" and jobs is not None:
            clamped = bounded_jobs(jobs, total)
            if clamped != jobs:
                typer.echo(f"dpfair: note: --jobs {jobs} clamped to {clamped} (the CPUs "
                           "available and the repetitions to run).", err=True)
            jobs = clamped
        result = run_experiment(
            experiment,
            reps=reps,
            jobs=jobs,
            backend=backend,
            store_dir=out,
            scheduler=scheduler,
            progress=not as_json,
            seed=seed,
            chunk_size=chunk_size,
        )
    except DPFairError as exc:
        _fail(str(exc))
    except OSError as exc:
        where = f"'{exc.filename}'" if exc.filename else "store"
        _fail(f"{where}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        _fail("interrupted. Finished chunks are stored; rerun the same command to resume.",
              EXIT_INTERRUPTED)
    if as_json:
        typer.echo(json.dumps(_strict(result.to_dict()), indent=2, allow_nan=False))
        return
    table, notes = _summary_table(result)
    # piped output: wide enough that "mean [low, high]" cells are not wrapped
    console = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)
    console.print(table)
    for note in notes:
        console.print(Text(note))


def register(app: typer.Typer) -> None:
    """Add the ``reproduce`` command to ``app`` (the main ``dpfair`` Typer app)."""
    app.command("reproduce")(reproduce)

"""The runner: per-(cell, rep) seeds, independence of jobs/chunking, store and errors."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import dpfair
from dpfair.experiments import (
    Experiment,
    MissingExtraError,
    StoreMismatchError,
    get_experiment,
    rep_seed,
    run_experiment,
)
from dpfair.experiments._store import ResultStore
from tests.experiments._helpers import assert_tables_equal

SMOKE = "median-smoke"


def test_rep_seed_is_the_spawned_child() -> None:
    for seed, cell, rep in [(0, 0, 0), (7, 3, 5), (2024, 11, 499)]:
        spawned = np.random.SeedSequence(seed).spawn(cell + 1)[cell].spawn(rep + 1)[rep]
        direct = rep_seed(seed, cell, rep)
        assert np.array_equal(spawned.generate_state(4), direct.generate_state(4))
    assert not np.array_equal(rep_seed(0, 0, 1).generate_state(4),
                              rep_seed(0, 1, 0).generate_state(4))


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """median-smoke, 6 reps, in this process (jobs=1), chunks of 7."""
    out = tmp_path_factory.mktemp("serial")
    return run_experiment(SMOKE, reps=6, jobs=1, store_dir=out, progress=False, seed=3,
                          chunk_size=7)


def test_results_do_not_depend_on_jobs_or_chunking(serial: Any, tmp_path: Path) -> None:
    parallel = run_experiment(SMOKE, reps=6, jobs=2, store_dir=tmp_path, progress=False,
                              seed=3)
    assert parallel.computed == 48 and parallel.reused == 0 and parallel.jobs == 2
    assert_tables_equal(serial.table, parallel.table)
    assert serial.summary == parallel.summary


def test_rows_are_run_one_of_their_own_seed(serial: Any) -> None:
    exp = get_experiment(SMOKE)
    table = serial.table
    assert table.column_names[:2] == ["cell", "rep"]
    assert table.column_names[2:2 + len(exp.parameters)] == list(exp.parameters)
    cells, reps = table.column("cell").to_pylist(), table.column("rep").to_pylist()
    assert list(zip(cells, reps, strict=True)) == [(c, r) for c in range(8) for r in range(6)]
    for i in (0, 13, 47):
        c, r = cells[i], reps[i]
        expected = exp.run_one(dict(exp.grid[c]), rep_seed(3, c, r))
        row = table.slice(i, 1).to_pylist()[0]
        assert {k: row[k] for k in expected} == expected
        assert row["method"] == exp.grid[c]["method"]


def test_rerun_reuses_and_more_reps_extend(serial: Any, tmp_path: Path) -> None:
    first = run_experiment(SMOKE, reps=3, jobs=1, store_dir=tmp_path, progress=False, seed=3)
    again = run_experiment(SMOKE, reps=3, jobs=1, store_dir=tmp_path, progress=False, seed=3)
    assert (again.computed, again.reused) == (0, 24)
    assert_tables_equal(first.table, again.table)
    more = run_experiment(SMOKE, reps=6, jobs=2, store_dir=tmp_path, progress=False, seed=3)
    assert (more.computed, more.reused) == (24, 24)
    assert_tables_equal(more.table, serial.table)
    # the store's own files: final table and summary, strict JSON
    assert_tables_equal(pq.read_table(tmp_path / "results.parquet"), serial.table)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary) == 8 and summary[0]["covered"]["kind"] == "proportion"


def test_summary_statistics(serial: Any) -> None:
    rec = serial.summary[0]
    assert rec["reps"] == 6 and rec["method"] == "expmech"
    widths = serial.table.filter(serial.table.column("cell").to_numpy() == 0)
    w = widths.column("rel_width").to_numpy()
    assert rec["rel_width"]["mean"] == pytest.approx(w.mean())
    assert rec["rel_width"]["low"] < w.mean() < rec["rel_width"]["high"]
    cov = rec["covered"]
    assert cov["n"] == 6 and 0.0 <= cov["low"] <= cov["mean"] <= cov["high"] <= 1.0


def test_stale_temporary_files_are_ignored_and_removed(tmp_path: Path) -> None:
    run_experiment(SMOKE, reps=1, jobs=1, store_dir=tmp_path, progress=False)
    stale = tmp_path / "chunks" / ".tmp-killed-mid-write.parquet"
    stale.write_bytes(b"PAR1 truncated")
    res = run_experiment(SMOKE, reps=2, jobs=1, store_dir=tmp_path, progress=False)
    assert not stale.exists() and res.table.num_rows == 16


def test_store_of_another_seed_or_grid_is_refused(tmp_path: Path) -> None:
    run_experiment(SMOKE, reps=1, jobs=1, store_dir=tmp_path, progress=False, seed=0)
    with pytest.raises(StoreMismatchError, match=r"holds results of experiment "
                       r"'median-smoke' with seed 0 .* not of 'median-smoke' with seed 1"):
        run_experiment(SMOKE, reps=1, jobs=1, store_dir=tmp_path, progress=False, seed=1)
    exp = get_experiment(SMOKE)
    smaller = replace(exp, grid=exp.grid[:2])
    with pytest.raises(StoreMismatchError, match="choose another output directory"):
        run_experiment(smaller, reps=1, jobs=1, store_dir=tmp_path, progress=False)


def test_a_store_is_locked_while_a_run_writes(tmp_path: Path) -> None:
    exp = get_experiment(SMOKE)
    with ResultStore(tmp_path, exp, 0), pytest.raises(
        dpfair.InvalidParameterError, match="another run is writing into this store"
    ):
        run_experiment(SMOKE, reps=1, jobs=1, store_dir=tmp_path, progress=False)


def _boom(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    if params["k"] == 1:
        raise RuntimeError("boom")
    return {"v": params["k"]}


def _bad_output(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    return {"v": [1, 2]}


def _clash(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    return {"k": 1.0}


def test_errors_in_run_one_name_the_cell_and_rep(tmp_path: Path) -> None:
    exp = Experiment("test-boom", "d", ({"k": 0}, {"k": 1}), _boom, reps=2)
    with pytest.raises(RuntimeError, match="boom") as info:
        run_experiment(exp, jobs=1, store_dir=tmp_path, progress=False)
    assert any("cell 1 {'k': 1}, repetition 0" in n for n in info.value.__notes__)
    # the first cell's chunk was stored before the failure
    assert (tmp_path / "chunks").is_dir()


@pytest.mark.parametrize(
    ("run_one", "pattern"),
    [(_bad_output, r"output 'v' of 'test-bad'=\[1, 2\]: expected a scalar"),
     (_clash, r"returned 'k', which is also a grid parameter")],
)
def test_bad_outputs_are_rejected(run_one: Any, pattern: str, tmp_path: Path) -> None:
    exp = Experiment("test-bad", "d", ({"k": 0},), run_one, reps=1)
    with pytest.raises(dpfair.InvalidParameterError, match=pattern):
        run_experiment(exp, jobs=1, store_dir=tmp_path, progress=False)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [({"reps": 0}, r"reps=0: expected a positive integer"),
     ({"jobs": 0}, r"jobs=0: expected a positive number of worker processes"),
     ({"backend": "spark"}, r"backend='spark': expected one of 'loky', 'dask'"),
     ({"scheduler": "tcp://127.0.0.1:1"}, r"only used with backend='dask'"),
     ({"seed": -1}, r"seed=-1: expected a non-negative integer"),
     ({"chunk_size": 0}, r"chunk_size=0: expected a positive integer")],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], pattern: str,
                                         tmp_path: Path) -> None:
    with pytest.raises(dpfair.InvalidParameterError, match=pattern):
        run_experiment(SMOKE, store_dir=tmp_path, progress=False, **kwargs)


def test_missing_dask_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)  # import dask... -> ImportError
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    store = tmp_path / "store"
    with pytest.raises(MissingExtraError, match=r"pip install 'dpfair\[dask\]'"):
        run_experiment(SMOKE, reps=1, backend="dask", store_dir=store, progress=False)
    assert not store.exists(), "failed before touching the store"
    assert issubclass(MissingExtraError, ImportError)
    assert issubclass(MissingExtraError, dpfair.DPFairError)

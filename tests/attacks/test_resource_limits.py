"""``dpfair reproduce`` with absurd --reps/--jobs/--chunk-size (issue 23, item 6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.attacks._helpers import run

HUGE = str(10**30)


def test_reps_of_ten_to_the_thirty_is_refused_at_once(tmp_path: Path) -> None:
    r = run("reproduce", "median-smoke", "--reps", HUGE, "--out", tmp_path / "store")
    assert r.returncode == 2 and "limit" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


@pytest.mark.slow
def test_jobs_and_chunk_size_of_ten_to_the_thirty_are_clamped(tmp_path: Path) -> None:
    r = run("reproduce", "median-smoke", "--reps", "2", "--jobs", HUGE, "--chunk-size",
            HUGE, "--json", "--out", tmp_path / "store")
    assert r.returncode == 0, r.stderr
    jobs = json.loads(r.stdout)["jobs"]
    assert 1 <= jobs <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize("args", [
    ["--bounds", "0", "1e300", "--granularity", "1e-10"],
    ["--bounds", "0", "1e308", "--granularity", "1e-300", "--method", "cdf"],
], ids=["expmech", "cdf"])
def test_an_overflowing_grid_is_one_line(tmp_path: Path, args: list[str]) -> None:
    from tests.attacks._helpers import write_column

    data = tmp_path / "d.csv"
    write_column(data)
    r = run("median-ci", data, "--column", "x", "--rho", "0.5", *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-300:]

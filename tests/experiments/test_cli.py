"""`dpfair reproduce`: listing, summary table, JSON, and one-line errors (exit code 2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpfair.cli import app

runner = CliRunner()


def test_list_shows_every_median_study() -> None:
    result = runner.invoke(app, ["reproduce", "--list"])
    assert result.exit_code == 0, result.stderr
    for name in ("median-width", "median-coverage", "median-sweep-n", "median-sweep-rho",
                 "median-sweep-sigma", "median-sweep-range", "median-smoke"):
        assert name in result.stdout
    listed = json.loads(runner.invoke(app, ["reproduce", "--list", "--json"]).stdout)
    assert {e["name"]: e["cells"] for e in listed}["median-width"] == 12


def test_summary_table_and_store(tmp_path: Path) -> None:
    args = ["reproduce", "median-smoke", "--reps", "3", "--jobs", "1", "--seed", "2",
            "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "median-smoke: mean [95% interval] per cell, 3 reps each" in text
    assert "rel_width" in text and "covered" in text and "binsearch_cdf" in text
    assert "computed 24 repetitions, reused 0 from the store" in text
    assert (tmp_path / "results.parquet").is_file() and (tmp_path / "summary.json").is_file()
    again = runner.invoke(app, [*args, "--json"])
    payload = json.loads(again.stdout)
    assert (payload["computed"], payload["reused"], payload["seed"]) == (0, 24, 2)
    assert len(payload["summary"]) == 8


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["reproduce", "median-widht"],
         "experiment='median-widht': not registered. Did you mean 'median-width'?"),
        (["reproduce"], "EXPERIMENT is missing"),
        (["reproduce", "median-smoke", "--backend", "spark"], "backend='spark'"),
        (["reproduce", "median-smoke", "--scheduler", "tcp://127.0.0.1:1"],
         "only used with backend='dask'"),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(args: list[str], pattern: str,
                                                   tmp_path: Path) -> None:
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "s")])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("dpfair: error: ")
    assert pattern in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_missing_dask_extra_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    result = runner.invoke(app, ["reproduce", "median-smoke", "--backend", "dask", "--out",
                                 str(tmp_path)])
    assert result.exit_code == 2
    assert "Install it with: pip install 'dpfair[dask]'" in result.stderr

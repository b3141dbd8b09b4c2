"""Inputs that used to end in a traceback: one line on stderr naming the argument, exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair import InvalidParameterError
from dpfair.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def column_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("errors") / "x.csv"
    x = np.random.default_rng(0).normal(size=2000)
    path.write_text("x\n" + "".join(f"{v!r}\n" for v in x.tolist()))
    return path


def _one_line_exit_2(args: list[str], *needles: str) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)  # not an uncaught exception
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("dpfair: error: ")
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("method", ["expmech", "cdf", "binsearch", "binsearch_cdf"])
@pytest.mark.parametrize("aggregate", ["never", "always"])
def test_median_ci_bounds_whose_width_overflows(
    column_csv: Path, method: str, aggregate: str
) -> None:
    _one_line_exit_2(
        ["median-ci", str(column_csv), "-c", "x", "--rho", "1", "--bounds", "-1e308", "1e308",
         "--method", method, "--aggregate", aggregate],
        "bounds=",
        "overflows",
    )


@pytest.mark.parametrize("method", ["expmech", "binsearch", "binsearch_cdf"])
@pytest.mark.parametrize("aggregate", ["never", "always"])
def test_median_ci_tiny_rho(column_csv: Path, method: str, aggregate: str) -> None:
    _one_line_exit_2(
        ["median-ci", str(column_csv), "-c", "x", "--rho", "1e-300", "--bounds", "-5", "5",
         "--method", method, "--aggregate", aggregate],
        "rho",
    )


@pytest.mark.parametrize("method", ["expmech", "cdf", "binsearch", "binsearch_cdf"])
def test_median_ci_subnormal_rho(column_csv: Path, method: str) -> None:
    _one_line_exit_2(
        ["median-ci", str(column_csv), "-c", "x", "--rho", "1e-320", "--bounds", "-5", "5",
         "--method", method],
        "rho=1e-320",
    )


def test_facility_tiny_epsilon(column_csv: Path) -> None:
    _one_line_exit_2(
        ["facility", str(column_csv), "-c", "x", "--epsilon", "1e-308", "--domain", "-5", "5"],
        "epsilon=1e-308",
    )


def test_dpexpmed_tiny_epsilon_python_api() -> None:
    from dpfair.facility import DPExpMed

    with pytest.raises(InvalidParameterError, match="epsilon=1e-308"):
        DPExpMed(epsilon=1e-308, domain=(0.0, 1.0))


def test_dpexpmed_small_epsilon_still_samples() -> None:
    from dpfair.facility import DPExpMed

    # ε = 1e-90: the sampler's window covers every piece instead of overflowing.
    x = np.random.default_rng(1).uniform(size=500)
    loc = DPExpMed(epsilon=1e-90, domain=(0.0, 1.0)).sample(x, rng=0)
    assert 0.0 <= loc <= 1.0


def test_truncated_result_store_chunk(tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = runner.invoke(
        app, ["reproduce", "median-smoke", "--reps", "1", "--jobs", "1", "--out", str(store)]
    )
    assert res.exit_code == 0, res.output
    chunk = sorted((store / "chunks").glob("part-*.parquet"))[0]
    chunk.write_bytes(chunk.read_bytes()[:100])  # as if killed by a crash outside dpfair
    line = _one_line_exit_2(
        ["reproduce", "median-smoke", "--reps", "1", "--jobs", "1", "--out", str(store)],
        chunk.name,
        "truncated or corrupt",
    )
    assert "Delete" in line

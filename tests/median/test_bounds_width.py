"""Bounds whose width hi − lo overflows are refused with one clear error (issue 15, item 8).

``bounds=(-1e308, 1e308)`` used to end in a raw ``ValueError: cannot convert float NaN to
integer`` deep inside ExpMech's rank targets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair import InvalidParameterError
from dpfair.cli import app
from dpfair.data import histogram_counts
from dpfair.facility import DPExpMed
from dpfair.median import confidence_interval, confidence_interval_from_counts

HUGE = (-1e308, 1e308)
MESSAGE = r"bounds=\(-1e\+308, 1e\+308\): the width hi - lo overflows"


@pytest.mark.parametrize("method", ["expmech", "cdf", "binsearch", "binsearch_cdf"])
def test_python_api_refuses_an_infinite_width(method):
    x = np.random.default_rng(0).normal(size=500)
    with pytest.raises(InvalidParameterError, match=MESSAGE):
        confidence_interval(x, rho=1.0, bounds=HUGE, method=method, rng=0)
    with pytest.raises(InvalidParameterError, match=MESSAGE):
        confidence_interval_from_counts(np.full(512, 1), 1.0, HUGE, method=method, rng=0)


def test_other_entry_points_share_the_check(tmp_path: Path):
    path = tmp_path / "x.csv"
    path.write_text("x\n1.0\n2.0\n")
    with pytest.raises(InvalidParameterError, match=MESSAGE):
        histogram_counts(path, "x", HUGE, 5)
    with pytest.raises(InvalidParameterError, match=r"domain=.*overflows"):
        DPExpMed(1.0, HUGE)


@pytest.mark.parametrize("aggregate", ["never", "always"])
def test_cli_exits_2_with_one_line(tmp_path: Path, aggregate: str):
    path = tmp_path / "x.csv"
    path.write_text("income\n" + "\n".join(str(v) for v in range(1, 200)) + "\n")
    result = CliRunner().invoke(app, [
        "median-ci", str(path), "--column", "income", "--rho", "0.5",
        "--bounds", "-1e308", "1e308", "--aggregate", aggregate,
    ])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "hi - lo overflows" in lines[0]

"""`dpfair median-ci --aggregate`: same answer as in memory for the tree methods."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dpfair.cli import app


@pytest.mark.parametrize("method", ["cdf", "binsearch", "binsearch_cdf", "expmech"])
def test_aggregate_matches_in_memory(tmp_path, method):
    x = np.random.default_rng(3).lognormal(np.log(1.5), 1.0, 5000)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"v": x}), path)
    runner = CliRunner()
    outs = {}
    for mode in ("always", "never"):
        res = runner.invoke(app, ["median-ci", str(path), "--column", "v", "--rho", "0.5",
                                  "--bounds", "-5", "15", "--method", method, "--seed", "4",
                                  "--json", "--aggregate", mode])
        assert res.exit_code == 0, res.output
        outs[mode] = json.loads(res.stdout)
    if method == "expmech":  # bin-rounded records: close, not identical
        assert outs["always"]["diagnostics"]["aggregated"] is True
        assert abs(outs["always"]["low"] - outs["never"]["low"]) < 0.2
    else:
        assert (outs["always"]["low"], outs["always"]["high"]) == (
            outs["never"]["low"], outs["never"]["high"])


def test_bad_aggregate_flag(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("v\n1\n2\n")
    res = CliRunner().invoke(app, ["median-ci", str(path), "--column", "v", "--rho", "0.5",
                                   "--bounds", "0", "3", "--aggregate", "sometimes"])
    assert res.exit_code == 2

"""FDP-Fair refuses a site whose labels are all equal, as CDP-Fair does (issue 15, item 9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfair._errors import InsufficientDataError
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import Site, make_protocol
from dpfair.fairclass.federated._filesite import FileSite

N = 400


def _cfg():
    specs = [("site-1", N, 2.0, 1e-6), ("site-2", N, 2.0, 1e-6)]
    return make_protocol(specs, feature_bounds=[(0, 1), (0, 1)], alpha=0.1)


@pytest.mark.parametrize("label", [0, 1])
def test_in_memory_site_refuses_a_constant_y(label):
    d = simulate(N, rng=1)
    y = np.full(N, label)
    with pytest.raises(InsufficientDataError, match=rf"site 'site-2', field 'y': all {N} "
                                                    rf"labels are {label}"):
        Site("site-2", d.X, y, d.A, config=_cfg(), random_state=0)
    Site("site-2", d.X, d.y, d.A, config=_cfg(), random_state=0)  # both labels: accepted


def test_cdp_fair_refuses_it_too():
    d = simulate(N, rng=1)
    with pytest.raises(InsufficientDataError, match="y: all values are 1"):
        CDPFairClassifier(epsilon=2.0, alpha=0.1, feature_bounds=[(0, 1), (0, 1)]).fit(
            d.X, np.ones(N, dtype=int), sensitive_features=d.A)


def test_file_site_refuses_a_constant_y(tmp_path: Path):
    d = simulate(N, rng=2)
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"x1": d.X[:, 0], "x2": d.X[:, 1],
                             "a": np.asarray(d.A, dtype=np.int64),
                             "y": np.zeros(N, dtype=np.int64)}), path)
    with pytest.raises(InsufficientDataError, match=r"site 'site-1', field 'y': all 400 "
                                                    r"labels are 0"):
        FileSite("site-1", path, features=["x1", "x2"], target="y", sensitive="a",
                 config=_cfg(), random_state=0)

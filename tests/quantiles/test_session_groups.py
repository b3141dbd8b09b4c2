"""Session.quantile_ci: one charge, per-group intervals under parallel composition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpfair
from dpfair import InvalidParameterError

BOUNDS = (0.0, 100.0)

# A Session draws its own randomness: a seed only through reproducible_seed (each release
# warns), release k drawing from SeedSequence(seed, spawn_key=(k,)).
pytestmark = pytest.mark.filterwarnings("ignore::dpfair.session.ReproducibleSeedWarning")


def _session(data, rho, seed):
    return dpfair.Session(data, budget=dpfair.privacy.Budget.zcdp(rho), reproducible_seed=seed)


def _stream(seed, k=0):
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    n = 900
    region = rng.choice(["north", "south", "east"], size=n)
    age = rng.gamma(4.0, 10.0, size=n).clip(0, 100)
    return pd.DataFrame({"age": age, "region": region})


def test_single_interval_charged_once(frame):
    s = _session(frame, 1.0, 3)
    r = s.quantile_ci("age", 0.9, rho=0.4, bounds=BOUNDS)
    assert s.spent.rho == pytest.approx(0.4)
    direct = dpfair.quantiles.confidence_interval(frame["age"].to_numpy(), 0.9, rho=0.4,
                                                  bounds=BOUNDS, rng=_stream(3))
    assert (r.low, r.high) == (direct.low, direct.high)


def test_family_simultaneous(frame):
    s = _session(frame, 1.0, 1)
    res = s.quantile_ci("age", [0.25, 0.5, 0.75], rho=0.5, bounds=BOUNDS)
    assert res.qs == (0.25, 0.5, 0.75)
    assert s.spent.rho == pytest.approx(0.5)


def test_groups_parallel_composition(frame):
    s = _session(frame, 1.0, 7)
    groups = ["south", "north", "east"]
    res = s.quantile_ci("age", 0.5, rho=0.5, bounds=BOUNDS, by="region", groups=groups,
                        group_sizes="public")
    assert list(res) == groups
    assert s.spent.rho == pytest.approx(0.5)  # once, not 3 x 0.5
    streams = _stream(7).spawn(3)
    for g, stream in zip(groups, streams, strict=True):
        rows = frame.loc[frame["region"] == g, "age"].to_numpy()
        direct = dpfair.quantiles.confidence_interval(rows, 0.5, rho=0.5, bounds=BOUNDS,
                                                      rng=stream)
        assert (res[g].low, res[g].high) == (direct.low, direct.high)
        assert res[g].n == rows.size


def test_a_change_in_one_group_touches_only_that_group(frame):
    # The neighbour relation with public sizes: one record changes value inside its group.
    groups = ["north", "south", "east"]
    other = frame.copy()
    i = int(np.flatnonzero(other["region"].to_numpy() == "north")[0])
    other.loc[i, "age"] = 99.0
    out = []
    for data in (frame, other):
        s = _session(data, 1.0, 11)
        out.append(s.quantile_ci("age", 0.5, rho=0.5, bounds=BOUNDS, by="region",
                                 groups=groups, group_sizes="public"))
    for g in ("south", "east"):
        assert (out[0][g].low, out[0][g].high) == (out[1][g].low, out[1][g].high)


def test_groups_need_public_list_and_sizes(frame):
    s = dpfair.Session(frame, budget=dpfair.privacy.Budget.zcdp(1.0))
    with pytest.raises(InvalidParameterError, match="groups=None"):
        s.quantile_ci("age", 0.5, rho=0.5, bounds=BOUNDS, by="region", group_sizes="public")
    with pytest.raises(InvalidParameterError, match="group_sizes"):
        s.quantile_ci("age", 0.5, rho=0.5, bounds=BOUNDS, by="region", groups=["north"])
    with pytest.raises(InvalidParameterError, match="only meaningful"):
        s.quantile_ci("age", 0.5, rho=0.5, bounds=BOUNDS, groups=["north"])
    assert s.spent.rho == pytest.approx(0.0)  # refused before any charge


def test_budget_refused_before_reading(frame):
    s = dpfair.Session(frame, budget=dpfair.privacy.Budget.zcdp(0.3))
    with pytest.raises(dpfair.BudgetExceededError):
        s.quantile_ci("age", 0.5, rho=0.5, bounds=BOUNDS)
    assert s.spent.rho == pytest.approx(0.0)


def test_groups_from_a_csv_file(frame, tmp_path):
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    groups = ["north", "south"]
    s_file = _session(str(path), 1.0, 5)
    got = s_file.quantile_ci("age", [0.25, 0.75], rho=0.5, bounds=BOUNDS, by="region",
                             groups=groups, group_sizes="public")
    s_mem = _session(frame, 1.0, 5)
    want = s_mem.quantile_ci("age", [0.25, 0.75], rho=0.5, bounds=BOUNDS, by="region",
                             groups=groups, group_sizes="public")
    for g in groups:
        assert got[g][0].n == want[g][0].n
        assert [(iv.low, iv.high) for iv in got[g]] == [(iv.low, iv.high) for iv in want[g]]
    assert s_file.spent.rho == pytest.approx(0.5)

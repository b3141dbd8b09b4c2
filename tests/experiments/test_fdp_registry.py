"""FDP-Fair studies in the central registry: listed, and equal to direct API calls."""

from __future__ import annotations

import numpy as np

from dpfair.experiments import get_experiment, list_experiments, rep_seed, run_experiment
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated.study import run_one


def test_registered():
    names = {e.name for e in list_experiments()}
    assert {"fdp-figure4", "fdp-figure5", "fdp-smoke"} <= names
    fig4 = get_experiment("fdp-figure4")
    assert {c["S"] for c in fig4.grid} == {4, 5, 6}
    fig5 = get_experiment("fdp-figure5")
    assert all(c["S"] * c["n_s"] == 7200 for c in fig5.grid)


def test_smoke_row_equals_direct_computation(tmp_path):
    exp = get_experiment("fdp-smoke")
    result = run_experiment("fdp-smoke", reps=1, jobs=1, store_dir=tmp_path, progress=False)
    table = result.table.to_pylist()
    cell = exp.grid[0]
    seed = rep_seed(0, 0, 0)
    data_seed, test_seed, fit_seed = seed.spawn(3)
    sites = [simulate(cell["n_s"], rng=np.random.default_rng(s))
             for s in data_seed.spawn(cell["S"])]
    test = simulate(cell["n_test"], rng=np.random.default_rng(test_seed))
    direct = run_one(sites, test, epsilon=cell["epsilon"], alpha=cell["alpha"],
                     variant=cell["variant"], seed=int(fit_seed.generate_state(1)[0]))
    row = next(r for r in table if r["cell"] == 0 and r["rep"] == 0)
    assert row["error"] == direct["error"]
    assert row["pop_abs_dd"] == direct["pop_abs_dd"]

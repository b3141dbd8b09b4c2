"""FDP-Fair studies in the central registry: listed, and equal to direct API calls."""

from __future__ import annotations

import numpy as np

from dpfair.experiments import get_experiment, list_experiments, rep_seed, run_experiment
from dpfair.experiments._fdp_paper import run_one
from dpfair.fairclass.datasets import simulate


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


def test_sensitivity_and_real_panels_registered():
    sens = get_experiment("fdp-sensitivity")
    rho_cells = [c for c in sens.grid if c["what"] == "rho"]
    cw_cells = [c for c in sens.grid if c["what"] == "c_omega"]
    assert {c["rho"] for c in rho_cells} == {0.0, 0.01, 0.02, 0.03, 0.05, 0.08}
    assert {c["c_omega"] for c in rho_cells} == {0.1}
    assert {c["c_omega"] for c in cw_cells} == {0.01, 0.05, 0.1, 0.2, 0.5}
    assert {c["rho"] for c in cw_cells} == {0.03}
    assert all(c["S"] == 3 and c["n_s"] == 2000 and c["alpha"] == 0.3 for c in sens.grid)
    for name, dataset in (("fdp-adult", "adult"), ("fdp-law", "law_school")):
        exp = get_experiment(name)
        assert {c["dataset"] for c in exp.grid} == {dataset}
        assert {c["variant"] for c in exp.grid} == {"default", "paper"}
        assert len({c["alpha"] for c in exp.grid}) == 8


def test_sensitivity_cell_passes_rho_and_c_omega_to_the_fit():
    exp = get_experiment("fdp-sensitivity")
    cell = {**next(c for c in exp.grid if c["what"] == "c_omega" and c["c_omega"] == 0.5),
            "n_s": 400, "n_test": 400}
    seed = rep_seed(3, 1, 2)
    row = exp.run_one(cell, seed)
    data_seed, test_seed, fit_seed = rep_seed(3, 1, 2).spawn(3)  # spawn() moves a sequence
    sites = [simulate(400, rng=np.random.default_rng(s)) for s in data_seed.spawn(3)]
    test = simulate(400, rng=np.random.default_rng(test_seed))
    direct = run_one(sites, test, epsilon=1.0, alpha=0.3, variant=cell["variant"],
                     seed=int(fit_seed.generate_state(1)[0]), rho=0.03, c_omega=0.5)
    assert row["error"] == direct["error"] and row["pop_abs_dd"] == direct["pop_abs_dd"]


def test_adult_row_equals_direct_computation():
    from dpfair.experiments.fairclass import DATASET_CODES, data_seed, load_dataset
    from dpfair.fairclass.datasets import train_test_split

    exp = get_experiment("fdp-adult")
    cell = exp.grid[3]
    seed = rep_seed(0, 3, 0)
    row = exp.run_one(cell, seed)
    seed = rep_seed(0, 3, 0)  # a fresh sequence: spawn() moves the state of the used one
    split = np.random.default_rng(data_seed(seed, DATASET_CODES["adult"]))
    train, test = train_test_split(load_dataset("adult"), 0.3, split)
    direct = run_one([train], test, epsilon=1.0, alpha=cell["alpha"], variant=cell["variant"],
                     seed=int(seed.generate_state(1)[0]), rho=0.02, population=False)
    assert row["error"] == direct["error"] and row["abs_dd"] == direct["abs_dd"]
    assert row["above_alpha"] == float(direct["abs_dd"] > cell["alpha"])

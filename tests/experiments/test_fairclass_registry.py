"""The registered CDP-Fair studies (paper 003, single server) in the central registry.

A tiny run equals the same numbers computed directly with the public
:mod:`dpfair.fairclass` API; tables do not depend on the number of workers; data are shared
across cells (common random numbers) and fresh per repetition.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfair import InvalidParameterError
from dpfair.experiments import Experiment, get_experiment, list_experiments, run_experiment
from dpfair.experiments._fairclass_paper import ALPHA_GRID_SIM
from dpfair.experiments.fairclass import (
    METHODS,
    SIM_EPSILONS,
    SIM_NS,
    DataUnavailableError,
    alpha_column,
    law_school_path,
    parse_alphas,
    real_grid,
    simulation_grid,
)
from dpfair.fairclass import (
    CDPFairClassifier,
    FairPlugInClassifier,
    PlugInClassifier,
    PrivatePlugInClassifier,
    demographic_disparity,
    misclassification_error,
)
from dpfair.fairclass.datasets import load_bundled_adult, simulate, train_test_split
from tests.experiments._helpers import assert_tables_equal

FAIRCLASS = {"fairclass-simulation", "fairclass-adult", "fairclass-law", "fairclass-smoke"}
ALPHAS = (0.1, 0.3)


def _tiny(name: str, grid: list[dict[str, Any]], reps: int) -> Experiment:
    return Experiment(name=f"{name}-tiny", description="test", grid=grid,
                      run_one=get_experiment(name).run_one, reps=reps)


def _estimator(method: str, eps: float, n_train: int, bounds: Any, seed: Any) -> Any:
    delta = (n_train / 2) ** -2
    if method == "cdp_fair":
        return CDPFairClassifier(epsilon=eps, delta=delta, feature_bounds=bounds,
                                 threshold_rule="target", random_state=seed)
    if method == "privacy_only":
        return PrivatePlugInClassifier(epsilon=eps, delta=delta, feature_bounds=bounds,
                                       random_state=seed)
    if method == "fairness_only":
        return FairPlugInClassifier(feature_bounds=bounds, random_state=seed)
    return PlugInClassifier(feature_bounds=bounds, random_state=seed)


def _direct(method: str, eps: float, train: Any, test: Any, seed: Any) -> dict[str, float]:
    """Per α: fit with plain ``fit`` (one α at a time is not the same S2 stream, so only
    the first α — drawn first after S1 — is compared exactly; see below)."""
    out: dict[str, float] = {}
    est = _estimator(method, eps, train.n, train.feature_bounds, seed)
    if method in ("cdp_fair", "fairness_only"):
        est.set_params(alpha=ALPHAS[0])
    est.fit(train.X, train.y, sensitive_features=train.A)
    p = est.predict_proba(test.X, sensitive_features=test.A)[:, 1]
    out["error"] = misclassification_error(test.y, p)
    out["abs_dd"] = abs(demographic_disparity(p, test.A))
    out["epsilon_spent"] = math.nan if est.privacy_spent_ is None else est.privacy_spent_.epsilon
    return out


# --------------------------------------------------------------------------- listing
def test_fairclass_studies_are_listed_with_their_source() -> None:
    listed = {e.name: e for e in list_experiments()}
    assert FAIRCLASS <= set(listed)
    for name in FAIRCLASS:
        exp = listed[name]
        assert "paper 003" in exp.reference
        assert exp.run_one.__module__ == "dpfair.experiments._fairclass"
        assert pickle.loads(pickle.dumps(exp.run_one)) is exp.run_one


def test_simulation_grid_is_figure3() -> None:
    exp = get_experiment("fairclass-simulation")
    private = {(c["method"], c["n"], c["epsilon"]) for c in exp.grid
               if c["method"] in ("cdp_fair", "privacy_only")}
    assert private == {(m, n, e) for m in ("cdp_fair", "privacy_only") for n in SIM_NS
                       for e in SIM_EPSILONS}
    assert SIM_NS == (5000, 7000, 9000) and SIM_EPSILONS == (0.75, 1.0, 2.0, 3.0, 4.0)
    others = [c for c in exp.grid if c["method"] in ("fairness_only", "unconstrained")]
    assert len(others) == 2 * len(SIM_NS) and all(c["epsilon"] == math.inf for c in others)
    assert {parse_alphas(c["alphas"]) for c in exp.grid} == {ALPHA_GRID_SIM}
    assert exp.n_cells == len(SIM_NS) * (2 * len(SIM_EPSILONS) + 2)
    assert {c["n_test"] for c in exp.grid} == {4000}


def test_alpha_columns() -> None:
    assert alpha_column("error", 0.05) == "error_a0p05"
    assert alpha_column("abs_dd", 0.025) == "abs_dd_a0p025"
    with pytest.raises(InvalidParameterError, match="alphas"):
        parse_alphas("0.1,1.5")


# --------------------------------------------------------------------------- simulation
@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    grid = simulation_grid(ns=(1200,), epsilons=(1.0, 4.0), alphas=ALPHAS, n_test=500)
    return run_experiment(_tiny("fairclass-simulation", grid, 2), jobs=1, progress=False,
                          store_dir=tmp_path_factory.mktemp("sim"), seed=11)


def test_tiny_simulation_run_equals_the_direct_computation(sim_run: Any) -> None:
    rows = sim_run.table.to_pylist()
    assert len(rows) == 6 * 2
    for row in rows:
        cell, rep = row["cell"], row["rep"]
        root = np.random.SeedSequence(11, spawn_key=(cell, rep))
        train_ss, test_ss = np.random.SeedSequence(11, spawn_key=(0xFA1C, 1200, rep)).spawn(2)
        train = simulate(1200, np.random.default_rng(train_ss))
        test = simulate(500, np.random.default_rng(test_ss))
        want = _direct(row["method"], row["epsilon"], train, test, root)
        # The first α's model is exactly `fit` at that α with the same seed (S1, then its
        # S2 is the first S2 drawn); unconstrained methods repeat their value for every α.
        assert row[alpha_column("error", ALPHAS[0])] == want["error"]
        assert row[alpha_column("abs_dd", ALPHAS[0])] == want["abs_dd"]
        if row["method"] in ("privacy_only", "unconstrained"):
            assert row[alpha_column("error", ALPHAS[1])] == want["error"]
        if row["method"] in ("cdp_fair", "privacy_only"):
            assert row["epsilon_spent"] == pytest.approx(row["epsilon"])
            assert row["delta_spent"] <= (600**-2) * (1 + 1e-12)
        else:
            assert math.isnan(row["epsilon_spent"]) and math.isnan(row["delta"])
        assert (row["train_rows"], row["test_rows"]) == (1200, 500)


def test_later_alphas_are_fit_alpha_path(sim_run: Any) -> None:
    from dpfair.fairclass import fit_alpha_path

    row = next(r for r in sim_run.table.to_pylist() if r["method"] == "cdp_fair")
    root = np.random.SeedSequence(11, spawn_key=(row["cell"], row["rep"]))
    train_ss, test_ss = np.random.SeedSequence(11, spawn_key=(0xFA1C, 1200, row["rep"])).spawn(2)
    train = simulate(1200, np.random.default_rng(train_ss))
    test = simulate(500, np.random.default_rng(test_ss))
    est = _estimator("cdp_fair", row["epsilon"], 1200, train.feature_bounds, root)
    models = fit_alpha_path(est, train.X, train.y, sensitive_features=train.A, alphas=ALPHAS)
    assert [m.alpha for m in models] == list(ALPHAS)
    assert np.array_equal(models[0].folds_[0].eta, models[1].folds_[0].eta)  # S1 shared
    p = models[1].predict_proba(test.X, sensitive_features=test.A)[:, 1]
    assert row[alpha_column("error", ALPHAS[1])] == misclassification_error(test.y, p)


def test_data_shared_across_cells_and_fresh_per_rep(sim_run: Any) -> None:
    rows = sim_run.table.to_pylist()
    unc = {r["rep"]: r[alpha_column("error", 0.1)] for r in rows
           if r["method"] == "unconstrained"}
    assert unc[0] != unc[1]
    # the unconstrained plug-in's row depends on the data and its own noise seed only


def test_simulation_table_does_not_depend_on_jobs(sim_run: Any, tmp_path: Path) -> None:
    parallel = run_experiment(sim_run.experiment, jobs=2, progress=False, store_dir=tmp_path,
                              seed=11)
    assert parallel.jobs == 2
    assert_tables_equal(sim_run.table, parallel.table)
    assert sim_run.summary == parallel.summary


def test_smoke_runs(tmp_path: Path) -> None:
    res = run_experiment("fairclass-smoke", reps=1, jobs=1, progress=False,
                         store_dir=tmp_path)
    assert res.table.num_rows == len(METHODS)


# --------------------------------------------------------------------------- real data
def test_tiny_adult_run_equals_the_direct_computation(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPFAIR_ADULT_PATH", raising=False)
    grid = [c for c in real_grid("adult", epsilons=(2.0,), alphas=ALPHAS, test_fraction=0.9)
            if c["method"] in ("cdp_fair", "unconstrained")]
    res = run_experiment(_tiny("fairclass-adult", grid, 1), jobs=1, progress=False,
                         store_dir=tmp_path, seed=3)
    data = load_bundled_adult()
    for row in res.table.to_pylist():
        split = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(0xFA1C, 1, 0)))
        train, test = train_test_split(data, 0.9, split)
        seed = np.random.SeedSequence(3, spawn_key=(row["cell"], 0))
        want = _direct(row["method"], row["epsilon"], train, test, seed)
        assert row[alpha_column("error", ALPHAS[0])] == want["error"]
        assert row[alpha_column("abs_dd", ALPHAS[0])] == want["abs_dd"]


def test_law_school_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("DPFAIR_LAW_SCHOOL_PATH", str(tmp_path / "absent.csv"))
    assert law_school_path() is None
    cell = get_experiment("fairclass-law").grid[0]
    with pytest.raises(DataUnavailableError, match="DPFAIR_LAW_SCHOOL_PATH"):
        get_experiment("fairclass-law").run_one(cell, np.random.SeedSequence(0))


def test_law_school_when_present(tmp_path: Path) -> None:
    if law_school_path() is None:
        pytest.skip("Law School data not found (../shared/data/law_school_xue_yu.csv)")
    grid = [c for c in real_grid("law_school", epsilons=(1.0,), alphas=ALPHAS,
                                 test_fraction=0.9) if c["method"] == "cdp_fair"]
    res = run_experiment(_tiny("fairclass-law", grid, 1), jobs=1, progress=False,
                         store_dir=tmp_path)
    row = res.table.to_pylist()[0]
    assert 0.0 <= row[alpha_column("error", 0.1)] <= 1.0
    assert row["epsilon_spent"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ({"method": "svm", "n": 500, "epsilon": 1.0, "n_test": 100, "alphas": "0.1"},
         "method='svm'"),
        ({"method": "cdp_fair", "n": 500, "epsilon": math.inf, "n_test": 100,
          "alphas": "0.1"}, "epsilon=inf"),
        ({"method": "unconstrained", "n": 500, "epsilon": 1.0, "n_test": 100,
          "alphas": "0.1"}, "epsilon=1.0"),
    ],
)
def test_bad_parameters_name_the_argument(params: dict[str, Any], pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=pattern):
        get_experiment("fairclass-simulation").run_one(params, np.random.SeedSequence(0))

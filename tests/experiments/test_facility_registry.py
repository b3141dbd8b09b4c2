"""The registered facility-location studies (paper 000) in the central registry.

Listing and grids; a tiny run of each study equals the same numbers computed directly
with the public :mod:`dpfair.facility` API; tables do not depend on the number of workers;
sampled data sets are shared across cells (common random numbers) and differ across
repetitions, deterministic cells ignore the seed.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair import InvalidParameterError
from dpfair.cli import app
from dpfair.experiments import Experiment, get_experiment, list_experiments, run_experiment
from dpfair.experiments._facility import (
    BETA,
    DOMAIN,
    SAMPLED_FAMILIES,
    SCALING_EPSILONS,
    SCALING_NS,
    sampled_law,
)
from dpfair.facility import (
    DPExpMed,
    GridExpMed,
    LaplaceMedian,
    ctm_family_max,
    ctm_worst_case,
    impossibility_pair,
    ks_distance,
    unwidened_expmed,
)
from dpfair.facility.bounds import ctm_bounds, spm_fair_bound, table1
from tests.experiments._helpers import assert_tables_equal

FACILITY = {"facility-scaling", "facility-widening", "facility-impossibility",
            "facility-baselines", "facility-smoke"}
FAMILIES = ("ctm_worst_p", "ctm_family_max", "ctm_uniform", "point_mass", "triangular",
            "truncated_normal")
METRICS = ("fair_quantile", "swdiff_quantile", "expected_fair", "expected_swdiff")


def _tiny(name: str, grid: list[dict[str, Any]], reps: int) -> Experiment:
    """A small grid run by a registered study's own ``run_one``."""
    return Experiment(name=f"{name}-tiny", description="test", grid=grid,
                      run_one=get_experiment(name).run_one, reps=reps)


def _rows(result: Any) -> list[dict[str, Any]]:
    return list(result.table.to_pylist())


def _sample(family: str, n: int, seed: int, rep: int) -> np.ndarray:
    """The documented data stream: SeedSequence(seed, spawn_key=(0xFAC, code, n, rep))."""
    ss = np.random.SeedSequence(seed, spawn_key=(0xFAC, SAMPLED_FAMILIES[family], n, rep))
    return np.sort(sampled_law(family).sample(n, np.random.default_rng(ss)))


def _metrics(dist: Any) -> dict[str, float]:
    level = 1.0 - BETA
    return {"fair_quantile": float(dist.fair_quantile(level)),
            "swdiff_quantile": float(dist.swdiff_quantile(level)),
            "expected_fair": float(dist.expected_fair()),
            "expected_swdiff": float(dist.expected_swdiff())}


def _worst_level_brute_force(n: int, eps: float, alpha: float | None = None) -> int:
    """Smallest k with P(p_α > k) ≤ β on D_k^CTM, by scanning k (no bisection)."""
    mech = DPExpMed(eps, DOMAIN, widening=alpha)
    for k in range((n + 1) // 2):
        if mech.distribution(ctm_worst_case(n, k, DOMAIN)).loss_sf(k) <= BETA:
            return k
    raise AssertionError("no level found")


# --------------------------------------------------------------------------- listing
def test_facility_studies_are_listed_with_their_source() -> None:
    listed = {e.name: e for e in list_experiments()}
    assert FACILITY <= set(listed)
    for name in FACILITY:
        exp = listed[name]
        assert "paper 000" in exp.reference
        assert exp.run_one.__module__ == "dpfair.experiments._facility"
        assert pickle.loads(pickle.dumps(exp.run_one)) is exp.run_one  # by reference


def test_cli_lists_the_facility_studies() -> None:
    result = CliRunner().invoke(app, ["reproduce", "--list", "--json"])
    assert result.exit_code == 0, result.stderr
    cells = {e["name"]: e["cells"] for e in json.loads(result.stdout)}
    assert cells["facility-scaling"] == len(FAMILIES) * 5 * 5
    assert cells["facility-widening"] == len(FAMILIES) * 2 * 21
    assert cells["facility-impossibility"] == 3 * 15 * 5 + 2 * 15
    assert cells["facility-baselines"] == 6 * 4 * 5


def test_scaling_grid_is_family_by_n_by_epsilon() -> None:
    exp = get_experiment("facility-scaling")
    cells = {(c["family"], c["n"], c["epsilon"]) for c in exp.grid}
    assert cells == {(f, n, e) for f in FAMILIES for n in SCALING_NS for e in SCALING_EPSILONS}
    assert min(SCALING_NS) == 101 and max(SCALING_NS) == 10**6 + 1
    assert (min(SCALING_EPSILONS), max(SCALING_EPSILONS)) == (0.1, 2.0)
    assert {c["beta"] for c in exp.grid} == {BETA}


def test_widening_grid_spans_a_hundredth_to_a_hundred_times_alpha_star() -> None:
    cs = sorted({c["c"] for c in get_experiment("facility-widening").grid})
    assert len(cs) == 21 and cs[10] == 1.0
    assert math.isclose(cs[0], 0.01) and math.isclose(cs[-1], 100.0)


# --------------------------------------------------------------------------- scaling
@pytest.fixture(scope="module")
def scaling_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    grid = [{"family": f, "n": 101, "epsilon": e, "beta": BETA}
            for f in FAMILIES for e in (0.5, 1.0)]
    return run_experiment(_tiny("facility-scaling", grid, 2), jobs=1, progress=False,
                          store_dir=tmp_path_factory.mktemp("scaling"), seed=7)


def test_tiny_scaling_run_equals_the_direct_computation(scaling_run: Any) -> None:
    rows = _rows(scaling_run)
    assert len(rows) == len(FAMILIES) * 2 * 2
    for row in rows:
        n, eps, fam = row["n"], row["epsilon"], row["family"]
        mech = DPExpMed(eps, DOMAIN)
        bounds = ctm_bounds(n, 1.0, eps, BETA)
        if fam == "ctm_family_max":
            best = ctm_family_max(n, eps, 1.0 - BETA, domain=DOMAIN)
            want = {k: best[k] for k in METRICS}
        else:
            if fam == "ctm_worst_p":
                k = _worst_level_brute_force(n, eps)
                x = ctm_worst_case(n, k, DOMAIN)
                assert row["dataset"].startswith(f"D_{k}^CTM")
            elif fam == "ctm_uniform":
                x = np.linspace(*DOMAIN, n)
            elif fam == "point_mass":
                x = np.full(n, 0.5)
            else:
                x = _sample(fam, n, 7, row["rep"])
                lam = ks_distance(x, sampled_law(fam).cdf)
                assert row["lambda_ks"] == lam
                assert row["fair_bound"] == spm_fair_bound(n, 1.0, eps, BETA, lam)
                assert row["fair_rate"] == table1(n, 1.0, eps, BETA, lam).spm_fair_upper
                assert math.isnan(row["swdiff_bound"])
            dist = mech.distribution(x)
            want = _metrics(dist)
            assert row["loss_quantile"] == dist.loss_quantile(1.0 - BETA)
        for key, value in want.items():
            assert row[key] == pytest.approx(value, rel=1e-12, abs=1e-300), (fam, key)
        if fam not in SAMPLED_FAMILIES:
            assert row["fair_bound"] == bounds.fair_bound
            assert row["swdiff_bound"] == bounds.swdiff_bound_corrected
            assert row["swdiff_bound_paper"] == bounds.swdiff_bound_paper
            assert row["fair_rate"] == table1(n, 1.0, eps, BETA, 1.0).ctm_fair_upper
            assert math.isnan(row["lambda_ks"])
        assert row["alpha"] == pytest.approx(1.0 / (n * eps))
        assert row["fair_ok"] is bool(row["fair_quantile"] <= row["fair_bound"] * (1 + 1e-9))
        assert row["fair_ok"], row  # every measured FAIR quantile below its bound
        assert (row["kstar"], row["min_k"]) == (bounds.kstar, bounds.min_k)


def test_sampled_data_shared_across_cells_and_fresh_per_repetition(scaling_run: Any) -> None:
    rows = _rows(scaling_run)
    for fam in FAMILIES:
        lam = {(r["epsilon"], r["rep"]): r["lambda_ks"] for r in rows if r["family"] == fam}
        fq = {(r["epsilon"], r["rep"]): r["fair_quantile"] for r in rows if r["family"] == fam}
        if fam in SAMPLED_FAMILIES:
            assert lam[(0.5, 0)] == lam[(1.0, 0)] and lam[(0.5, 1)] == lam[(1.0, 1)]
            assert lam[(0.5, 0)] != lam[(0.5, 1)]
        else:  # the seed is ignored: every repetition is the same row
            assert fq[(0.5, 0)] == fq[(0.5, 1)] and fq[(1.0, 0)] == fq[(1.0, 1)]


def test_scaling_table_does_not_depend_on_jobs(scaling_run: Any, tmp_path: Path) -> None:
    exp = scaling_run.experiment
    parallel = run_experiment(exp, jobs=2, progress=False, store_dir=tmp_path, seed=7)
    assert parallel.jobs == 2 and parallel.computed == scaling_run.table.num_rows
    assert_tables_equal(scaling_run.table, parallel.table)
    assert scaling_run.summary == parallel.summary


# --------------------------------------------------------------------------- widening
def test_tiny_widening_run_equals_the_direct_computation(tmp_path: Path) -> None:
    grid = [{"family": f, "n": 101, "epsilon": 1.0, "c": c, "beta": BETA}
            for f in ("ctm_worst_p", "ctm_uniform", "truncated_normal") for c in (0.1, 10.0)]
    result = run_experiment(_tiny("facility-widening", grid, 1), jobs=1, progress=False,
                            store_dir=tmp_path, seed=3)
    for row in _rows(result):
        n, eps, c, fam = row["n"], row["epsilon"], row["c"], row["family"]
        alpha = c / (n * eps)
        assert row["alpha"] == pytest.approx(alpha)
        if fam == "ctm_worst_p":  # D_k at the worst level *of this alpha*
            x = ctm_worst_case(n, _worst_level_brute_force(n, eps, alpha), DOMAIN)
        elif fam == "ctm_uniform":
            x = np.linspace(*DOMAIN, n)
        else:
            x = _sample(fam, n, 3, 0)
        want = _metrics(DPExpMed(eps, DOMAIN, widening=alpha).distribution(x))
        for key, value in want.items():
            assert row[key] == pytest.approx(value, rel=1e-12, abs=1e-300), (fam, c, key)


# --------------------------------------------------------------------------- impossibility
def test_impossibility_study_holds_everywhere_and_matches_direct(tmp_path: Path) -> None:
    result = run_experiment("facility-impossibility", jobs=1, progress=False,
                            store_dir=tmp_path)
    rows = _rows(result)
    assert len(rows) == get_experiment("facility-impossibility").n_cells
    assert all(r["holds"] for r in rows)
    assert all(r["epsilon_spent"] == r["epsilon"] for r in rows)
    mechs = {
        "dpexpmed": lambda e: DPExpMed(e, DOMAIN),
        "dpexpmed_alpha0": lambda e: unwidened_expmed(e, DOMAIN),
        "laplace": lambda e: LaplaceMedian(e, DOMAIN),
        "grid_rank": lambda e: GridExpMed(e, DOMAIN, grid_size=1000, score="rank"),
        "grid_percentile": lambda e: GridExpMed(e, DOMAIN, grid_size=1000,
                                                score="percentile"),
    }
    for row in rows:
        if row["pair"] != "thm5.1" or row["n"] != 11:
            continue
        pair = impossibility_pair(11, DOMAIN)
        mech = mechs[row["mechanism"]](row["epsilon"])
        p1 = mech.distribution(pair.first).fair_sf(0.5, inclusive=True)
        p2 = mech.distribution(pair.second).fair_sf(0.5, inclusive=True)
        assert (row["prob_first"], row["prob_second"]) == (p1, p2)
        assert row["bound"] == pytest.approx(1.0 / (1.0 + math.exp(row["epsilon"])),
                                             rel=1e-12)
        assert row["distance"] == 1 and row["radius"] == 0.5
    assert {r["distance"] for r in rows if r["pair"] == "thm7.21"} == {10}


# --------------------------------------------------------------------------- baselines
@pytest.fixture(scope="module")
def baselines_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    grid = [{"dataset": d, "n": 101, "epsilon": 1.0, "mechanism": m, "beta": BETA}
            for d in ("triangular", "ctm_worst_p", "bimodal")
            for m in ("dpexpmed", "laplace", "grid_rank")]
    return run_experiment(_tiny("facility-baselines", grid, 2), jobs=1, progress=False,
                          store_dir=tmp_path_factory.mktemp("baselines"), seed=5)


def test_tiny_baselines_run_equals_the_direct_computation(baselines_run: Any) -> None:
    mechs = {"dpexpmed": DPExpMed(1.0, DOMAIN), "laplace": LaplaceMedian(1.0, DOMAIN),
             "grid_rank": GridExpMed(1.0, DOMAIN, grid_size=1000, score="rank")}
    for row in _rows(baselines_run):
        if row["dataset"] == "triangular":
            x = _sample("triangular", 101, 5, row["rep"])
        elif row["dataset"] == "ctm_worst_p":
            x = ctm_worst_case(101, _worst_level_brute_force(101, 1.0), DOMAIN)
        else:
            x = impossibility_pair(101, DOMAIN).first
        got = _metrics(mechs[row["mechanism"]].distribution(x))
        ref = _metrics(mechs["dpexpmed"].distribution(x))
        for key in METRICS:
            assert row[key] == pytest.approx(got[key], rel=1e-12, abs=1e-300)
            want = got[key] / ref[key] if ref[key] > 0 else math.nan
            assert row[f"{key}_vs_dpexpmed"] == pytest.approx(want, rel=1e-12, nan_ok=True)
        assert row["epsilon_spent"] == 1.0
        if row["mechanism"] == "dpexpmed":
            assert row["expected_fair_vs_dpexpmed"] == 1.0


def test_baselines_table_does_not_depend_on_jobs(baselines_run: Any, tmp_path: Path) -> None:
    parallel = run_experiment(baselines_run.experiment, jobs=2, progress=False,
                              store_dir=tmp_path, seed=5)
    assert_tables_equal(baselines_run.table, parallel.table)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("name", "params", "pattern"),
    [
        ("facility-scaling", {"family": "gaussian", "n": 11, "epsilon": 1.0, "beta": BETA},
         "family='gaussian'"),
        ("facility-widening", {"family": "point_mass", "n": 11, "epsilon": 1.0, "c": 0.0,
                               "beta": BETA}, "c=0.0"),
        ("facility-impossibility", {"pair": "thm9", "n": 11, "epsilon": 1.0,
                                    "mechanism": "dpexpmed"}, "pair='thm9'"),
        ("facility-baselines", {"dataset": "point_mass", "n": 11, "epsilon": 1.0,
                                "mechanism": "opendp", "beta": BETA}, "mechanism='opendp'"),
    ],
)
def test_bad_parameters_name_the_argument(name: str, params: dict[str, Any],
                                          pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=pattern):
        get_experiment(name).run_one(params, np.random.SeedSequence(0))

"""The four facility experiments run (quick grids), write JSON + PNG and reach the claims."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpfair import InvalidParameterError
from dpfair.facility.experiments import EXPERIMENTS, run_experiment, worst_case_level


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("facility-exp")
    calls: list[tuple[int, int, str]] = []
    res = {name: run_experiment(name, out, quick=True, seed=0,
                                progress=lambda d, t, s: calls.append((d, t, s)))
           for name in EXPERIMENTS}
    assert calls and calls[-1][0] == calls[-1][1]
    return {"out": out, **res}


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_files_written(results, name):
    out = results["out"]
    data = json.loads((out / f"{name}.json").read_text())
    assert data["name"] == name and data["rows"]
    png = out / f"{name}.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert results[name].to_dict()["figures"] == [str(png)]


def test_scaling_slopes_and_bounds(results):
    s = results["scaling"].summary
    slopes = s["slopes"]
    # Table 1 on CTM: FAIR ∝ 1/(nε), SWDIFF ∝ 1/(nε²), here on evenly spaced data
    assert slopes["ctm_uniform/fair_quantile/n"] == pytest.approx(-1.0, abs=0.05)
    assert slopes["ctm_uniform/fair_quantile/epsilon"] == pytest.approx(-1.0, abs=0.1)
    assert slopes["ctm_uniform/swdiff_quantile/n"] == pytest.approx(-1.0, abs=0.05)
    assert slopes["ctm_uniform/swdiff_quantile/epsilon"] == pytest.approx(-2.0, abs=0.15)
    # the point mass: SWDIFF does not fall with n (Thm 7.13 fails there)
    assert slopes["point_mass/swdiff_quantile/n"] == pytest.approx(0.0, abs=0.05)
    checks = s["checks"]
    assert checks["fair_quantile_below_explicit_bound"]
    assert checks["swdiff_quantile_below_corrected_bound"]
    assert not checks["swdiff_quantile_below_paper_bound(11)"]
    # only concentrated data break it: the point mass, and D_k^CTM with every agent at hi
    assert {v["family"] for v in checks["paper_bound_violations"]} <= {"point_mass",
                                                                        "ctm_family_max"}
    for row in checks["worst_case_level_vs_kstar"]:
        assert row["k_beta"] <= row["min_k"] <= row["kstar"]


def test_widening_optimum(results):
    opt = results["widening"].summary["optimum"]
    assert opt["ctm_family_max/eps=1/fair_quantile"]["ratio_at_alpha_star"] == pytest.approx(
        1.0, abs=0.05)
    assert opt["point_mass/eps=1/fair_quantile"]["c_opt"] == pytest.approx(0.01)


def test_impossibility_holds_for_everyone(results):
    s = results["impossibility"].summary
    assert s["all_hold"] and not s["violations"]
    assert 1.0 <= s["closest_to_bound"]["ratio"] < 1.2


def test_baselines_laplace_is_far_worse(results):
    ratios = results["baselines"].summary["ratio_to_dpexpmed"]
    for key, r in ratios.items():
        if key.startswith(("triangular", "truncated_normal", "ctm_uniform")):
            assert r["Laplace median (sens. m)"] > 10, key
        if key.startswith("point_mass") and "fair" in key:
            assert r["DPExpMed(alpha=0)"] > 100, key  # without widening: uniform output


def test_worst_case_level_is_the_smallest_valid_k():
    k, dist = worst_case_level(201, 1.0, 0.05)
    assert dist.loss_sf(k) <= 0.05
    from dpfair.facility import DPExpMed, ctm_worst_case

    below = DPExpMed(1.0, (0.0, 1.0)).distribution(ctm_worst_case(201, k - 1, (0.0, 1.0)))
    assert below.loss_sf(k - 1) > 0.05


def test_unknown_experiment():
    with pytest.raises(InvalidParameterError, match="name='nope'"):
        run_experiment("nope")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_full_size_experiments(name, tmp_path: Path):
    res = run_experiment(name, tmp_path, quick=False)
    if name == "scaling":
        assert res.summary["checks"]["fair_quantile_below_explicit_bound"]
        assert res.summary["checks"]["swdiff_quantile_below_corrected_bound"]
    if name == "impossibility":
        assert res.summary["all_hold"]

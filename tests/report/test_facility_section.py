"""The facility-location section of the report (paper 000): figures, numbers, settings."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfair.experiments import get_experiment
from dpfair.facility import DPExpMed, optimal_location, truncated_normal_law
from dpfair.report import FacilityReportConfig, ReportConfig, build_report
from dpfair.report._facility import facility_section


@pytest.fixture(scope="module")
def section() -> Any:
    return facility_section(FacilityReportConfig.tiny(), seed=0)


def test_section_has_three_figures_and_two_baseline_tables(section: Any) -> None:
    html = "\n".join(section.blocks)
    figures = re.findall(r'<figure id="(fig-facility-[a-z]+)">', html)
    assert figures == ["fig-facility-law", "fig-facility-scaling",
                       "fig-facility-impossibility"]
    assert html.count("<table>") == 3  # slopes, E[FAIR], E[SWDIFF]
    for caption in re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S):
        assert "Setting:" in caption and "Seed 0" in caption
        assert "ε-DP" in caption and re.search(r"\d-DP", caption)


def test_the_law_part_is_the_exact_law_on_the_stated_sample(section: Any) -> None:
    cfg = FacilityReportConfig.tiny()
    data_ss, _ = np.random.SeedSequence(0, spawn_key=(0xFAC,)).spawn(2)
    law = truncated_normal_law((0.0, 1.0), peak=0.4, scale=1.0 / 8.0)
    x = law.sample(cfg.law_n, np.random.default_rng(data_ss))
    got = section.results["law"]
    assert got["optimum"] == optimal_location(x)
    for eps, ef, a in zip(cfg.law_epsilons, got["expected_fair"], got["widening"], strict=True):
        dist = DPExpMed(eps, (0.0, 1.0)).distribution(x)
        assert ef == dist.expected_fair()
        assert a == pytest.approx(1.0 / (cfg.law_n * eps))
    # the sampler's draws against the exact cdf: KS distance of 200 draws, far below the
    # 1e-6 critical value (about 0.19 for 200 draws)
    assert 0.0 < got["ks_distance_of_draws"] < 0.19


def test_scaling_rows_are_the_registered_studys_rows(section: Any) -> None:
    rows = section.results["scaling"]["rows"]
    cfg = FacilityReportConfig.tiny()
    assert len(rows) == len(cfg.families) * len(cfg.scaling_cells())
    assert section.results["scaling"]["fair_quantile_below_explicit_bound"] is True
    run_one = get_experiment("facility-scaling").run_one
    for row in rows:
        if row["family"] in ("ctm_uniform", "point_mass"):  # deterministic: any seed
            want = run_one({"family": row["family"], "n": row["n"], "epsilon": row["epsilon"],
                            "beta": cfg.beta}, np.random.SeedSequence(123))
            assert row["fair_quantile"] == want["fair_quantile"]
    slopes = section.results["scaling"]["slopes"]
    assert slopes["ctm_uniform"]["fair_quantile/n"] == pytest.approx(-1.0, abs=0.02)
    assert slopes["point_mass"]["swdiff_quantile/epsilon"] == pytest.approx(-1.0, abs=0.02)


def test_impossibility_and_baselines(section: Any) -> None:
    imp = section.results["impossibility"]
    assert imp["all_hold"] is True
    assert all(r["max_prob"] >= 1.0 / (1.0 + math.exp(r["epsilon"])) * (1 - 1e-12)
               for r in imp["rows"])
    base = {(r["dataset"], r["mechanism"]): r for r in section.results["baselines"]["rows"]}
    x = np.linspace(0.0, 1.0, FacilityReportConfig.tiny().baseline_n)
    dist = DPExpMed(1.0, (0.0, 1.0)).distribution(x)
    assert base[("ctm_uniform", "dpexpmed")]["expected_fair"] == dist.expected_fair()
    assert base[("ctm_uniform", "dpexpmed")]["expected_fair_vs_dpexpmed"] == 1.0


def test_full_settings_are_cells_of_the_registered_studies() -> None:
    """The full report draws the registered studies' cells (issue 3's settings)."""
    full = FacilityReportConfig.full()
    scaling = {(c["family"], c["n"], c["epsilon"]) for c in
               get_experiment("facility-scaling").grid}
    for _, n, eps in full.scaling_cells():
        assert {(f, n, eps) for f in full.families} <= scaling
    assert max(full.ns) == 10**6 + 1 and min(full.epsilons) == 0.1
    imp = {(c["n"], c["epsilon"]) for c in get_experiment("facility-impossibility").grid
           if c["pair"] == "thm5.1"}
    assert {(n, e) for n in full.impossibility_ns for e in full.impossibility_epsilons} == imp
    base = {(c["n"], c["epsilon"]) for c in get_experiment("facility-baselines").grid}
    assert (full.baseline_n, full.baseline_epsilon) in base
    quick = FacilityReportConfig.quick()
    assert quick.units() < full.units()


def test_results_json_holds_the_facility_section(tmp_path: Path) -> None:
    index = build_report(tmp_path, seed=0, config=ReportConfig.tiny())
    results = json.loads((index.parent / "results.json").read_text(encoding="utf-8"))
    fac = results["sections"]["facility"]
    assert set(fac) == {"law", "scaling", "impossibility", "baselines"}
    assert 'href="#facility"' in index.read_text(encoding="utf-8")


def test_swdiff_rates_are_the_corrected_ones_and_the_papers_are_marked_refuted(
    section: Any,
) -> None:
    """The report must not present the paper's SWDIFF rate (Thms 7.13/7.19) as valid; it
    says so in plain words (no theorem numbers or family names in the text)."""
    html = __import__("html").unescape("\n".join(section.blocks))
    assert "corrected rate" in html
    assert "the paper's rate (Table 1; its SWDIFF entries are too small)" in html
    assert "m·ln²(1/β)/(nε²) + m/ε" in html and "facility_dpexpmed.md §8" in html

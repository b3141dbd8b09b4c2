"""The fair-classification section of the report (paper 003): figures, numbers, settings."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from dpfair.experiments import get_experiment, rep_seed
from dpfair.experiments.fairclass import alpha_column, simulation_grid
from dpfair.report import FairclassReportConfig
from dpfair.report._fairclass import fairclass_section


@pytest.fixture(scope="module")
def section() -> Any:
    return fairclass_section(FairclassReportConfig.tiny(), seed=0)


def test_section_has_its_figures_and_captions(section: Any) -> None:
    html = "\n".join(section.blocks)
    figures = re.findall(r'<figure id="(fig-fairclass-[a-z]+)">', html)
    assert figures == ["fig-fairclass-alpha", "fig-fairclass-epsilon", "fig-fairclass-real"]
    # certification rates; shares above α; full Adult; many features (FDP-Fair: own section)
    assert html.count("<table>") == 4
    for caption in re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S):
        assert "Setting:" in caption and "Seed 0" in caption and "Privacy:" in caption
        assert "y = x" in caption or "ε" in caption
        # the (ε, δ) per fit as reported by privacy_spent_
        assert re.search(r"\(1, [\d.e+-]+\)-DP", caption) or re.search(
            r"\(2, [\d.e+-]+\)-DP", caption), caption
        assert "MISMATCH" not in caption


def test_headline_uses_the_certified_rule_and_shows_its_rate(section: Any) -> None:
    """Issue 20: Figure 8's solid curves are the default (certified) rule, the paper's target
    rule is the comparison, and the certification rate is reported per (N, ε, α)."""
    html = "\n".join(section.blocks)
    caption = re.search(r'<figure id="fig-fairclass-alpha">.*?<figcaption>(.*?)</figcaption>',
                        html, flags=re.S).group(1)
    assert "certified threshold rule" in caption and "target rule" in caption
    rates = section.results["simulation"]["certification_rate"]
    assert rates and all(0.0 <= v <= 1.0 for per in rates.values() for v in per.values())
    assert "Certification rate" in html


def test_numbers_are_the_registered_study_rows(section: Any) -> None:
    """A summary mean equals the mean of run_one over the same cells and seeds."""
    cfg = FairclassReportConfig.tiny()
    cells = simulation_grid(cfg.sim_ns, cfg.sim_epsilons, cfg.sim_alphas, cfg.sim_n_test)
    i = next(k for k, c in enumerate(cells) if c["method"] == "cdp_fair")
    run_one = get_experiment("fairclass-simulation").run_one
    outs = [run_one(cells[i], rep_seed(0, i, r)) for r in range(cfg.sim_reps)]
    a = cfg.sim_alphas[0]
    want = float(np.mean([o[alpha_column("error", a)] for o in outs]))
    got = next(s for s in section.results["simulation"]["summary"]
               if s["method"] == "cdp_fair" and s["epsilon"] == cells[i]["epsilon"])
    assert got["error_mean"][f"{a:g}"] == pytest.approx(want, rel=1e-12)
    assert got["reps"] == cfg.sim_reps


def test_full_config_is_the_registered_grid() -> None:
    full = FairclassReportConfig.full()
    assert full.sim_cells() == list(get_experiment("fairclass-simulation").grid)
    assert full.real_cells("adult") == list(get_experiment("fairclass-adult").grid)
    assert full.sim_reps == 200 and full.real_reps == 200


def test_federated_section_reports_each_number_of_sites() -> None:
    """FDP-Fair is its own section: repetitions of fdp-figure5 with 95% intervals."""
    from dpfair.report._federated import federated_section

    cfg = FairclassReportConfig.tiny()
    sec = federated_section(cfg, seed=0)
    rows = sec.results["federated"]
    assert [r["S"] for r in rows] == list(cfg.federated_sites)
    run_one = get_experiment("fdp-figure5").run_one
    for i, r in enumerate(rows):
        assert r["reps"] == cfg.federated_reps
        assert 0.0 <= r["pop_abs_dd"] <= 1.0 and 0.0 < r["error"] < 0.5
        assert math.isfinite(r["pop_risk"]) and r["pop_risk_ci95"] >= 0.0
        cell = {"S": r["S"], "n_s": cfg.federated_n_total // r["S"], "epsilon": 1.0,
                "alpha": cfg.federated_alpha, "variant": "default", "n_test": 2500}
        outs = [run_one(cell, rep_seed(0, i, k)) for k in range(cfg.federated_reps)]
        assert r["error"] == pytest.approx(float(np.mean([o["error"] for o in outs])))
    html = "\n".join(sec.blocks)
    assert '<figure id="fig-federated-sites">' in html and "What to look at" in html
    assert sec.summaries and "site" in sec.summaries[0]


def test_quick_config_runs_enough_fdp_repetitions_for_error_bars() -> None:
    assert FairclassReportConfig.quick().federated_reps >= 15
    assert FairclassReportConfig.full().federated_reps == 200


def test_full_adult_subsection_is_the_registered_study(section: Any) -> None:
    """The many-features table: heading, setting, privacy, the comparator sentence, and
    numbers equal to run_one of ``fairclass-full-adult`` over the same cells and seeds."""
    html = "\n".join(section.blocks)
    assert "Many features: full Adult" in html
    cfg = FairclassReportConfig.tiny()
    cells = cfg.full_adult_cells()
    start = html.index("Many features: full Adult")
    text = html[start:html.index("</table>", start)]
    assert "Setting:" in text and "Seed 0" in text and "Privacy:" in text
    assert "MISMATCH" not in text
    assert re.search(r"\(1, [\d.e+-]+\)-DP", text) and re.search(r"\(4, [\d.e+-]+\)-DP", text)
    assert "diffprivlib" in text and "not a private" in text
    assert "docs/fairclass_full_adult.md" in text
    # one table row per (method, ε, α)
    res = section.results["full_adult"]
    assert len(res["summary"]) == 2 * len(cells)
    assert text.count("<tr>") == 1 + 2 * len(cells)
    run_one = get_experiment("fairclass-full-adult").run_one
    i = next(k for k, c in enumerate(cells) if c["method"] == "linear_all")
    outs = [run_one(cells[i], rep_seed(0, i, r)) for r in range(cfg.full_adult_reps)]
    got = next(s for s in res["summary"]
               if s["method"] == "linear_all" and s["epsilon"] == cells[i]["epsilon"]
               and s["alpha"] == 0.05)
    assert got["error_mean"] == pytest.approx(
        float(np.mean([o[alpha_column("error", 0.05)] for o in outs])), rel=1e-12)
    assert got["certified_share"] == pytest.approx(
        float(np.mean([o[alpha_column("certified", 0.05)] for o in outs])), rel=1e-12)
    assert got["reps"] == cfg.full_adult_reps
    lr = [s for s in res["summary"] if s["method"] == "nonprivate_lr"]
    assert lr and all(math.isnan(s["certified_share"]) for s in lr)


def test_full_adult_configs() -> None:
    assert FairclassReportConfig.quick().full_adult_reps == 2
    full = FairclassReportConfig.full()
    assert full.full_adult_reps == 10 and full.full_adult_rows == 0
    assert full.full_adult_cells() == list(get_experiment("fairclass-full-adult").grid)


def test_many_features_part_reports_the_linear_score(section: Any) -> None:
    """Issue 19: the synthetic 20-feature design, the centred linear score (radius auto and
    box) and FDP-Fair's linear score over 4 unequal sites next to non-private LR + exact
    thresholds."""
    mf = section.results["many_features"]
    assert mf["reps"] == FairclassReportConfig.tiny().many_features_reps
    methods = [s["method"] for s in mf["summary"]]
    assert methods == ["linear (radius auto)", "linear (radius box)",
                       "FDP-Fair linear, 4 sites (radius auto)",
                       "non-private LR + exact thresholds"]
    assert all(0.0 < s["error_mean"] < 0.5 for s in mf["summary"])
    assert mf["summary"][2]["certified_share"] is not None
    assert mf["summary"][3]["certified_share"] is None
    assert FairclassReportConfig.full().many_features_reps == 10

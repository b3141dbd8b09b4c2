"""``fair-classify --estimator/--radius/--constraints/--uncertified``: the Session's score
and certification options on the command line, each charged as any fit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair.cli import app
from dpfair.fairclass.datasets import load_bundled_adult

runner = CliRunner()


@pytest.fixture(scope="module")
def csvs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fairopt")
    d = load_bundled_adult()
    rows = np.random.default_rng(1).permutation(d.n)
    header = "Age,Workclass,Education-Num,Sensitive,Label"
    for name, sel in (("train.csv", rows[:12000]), ("test.csv", rows[12000:16000])):
        block = np.column_stack([d.X[sel], d.A[sel], d.y[sel]])
        np.savetxt(folder / name, block, delimiter=",", header=header, comments="", fmt="%g")
    return folder


def _args(folder, *extra, alpha="0.1"):
    return ["fair-classify", str(folder / "train.csv"), str(folder / "test.csv"),
            "--target", "Label", "--sensitive", "Sensitive",
            "--features", "Age", "Workclass", "Education-Num",
            "--bounds", "17", "90", "0", "8", "1", "16",
            "--epsilon", "1", "--delta", "1e-8", "--alpha", alpha, "--seed", "5", *extra]


def _labels(out):
    return [r["label"] for r in out["privacy_ledger"]["releases"]]


def test_linear_score_with_a_private_radius_is_charged_inside_the_fit(csvs):
    res = runner.invoke(app, _args(csvs, "--estimator", "linear", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["estimator"] == "linear"
    assert out["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    assert any("row radius" in label for label in _labels(out))
    box = json.loads(runner.invoke(app, _args(csvs, "--estimator", "linear", "--radius", "box",
                                              "--json")).stdout)
    assert not any("row radius" in label for label in _labels(box))  # public: not charged
    assert box["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    # the table form of a linear fit (no bandwidth) used to crash with a TypeError
    table = runner.invoke(app, _args(csvs, "--estimator", "linear"))
    assert table.exit_code == 0, table.output
    assert "n/a (linear score)" in table.stdout


def test_equal_opportunity_reports_the_capped_gap(csvs):
    res = runner.invoke(app, _args(csvs, "--constraints", "opportunity", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["constraints"] == "equal_opportunity"
    assert out["test_abs_eod"] is not None and 0.0 <= out["test_abs_eod"] <= 1.0
    assert out["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    table = runner.invoke(app, _args(csvs, "--constraints", "equal_opportunity"))
    assert "test |EOD|" in table.stdout


def test_equal_opportunity_from_aggregates(csvs):
    """--constraints opportunity on the out-of-core path (--aggregate always; a file over
    2^24 rows takes it under 'auto'): fitted from DuckDB aggregates, charged as in memory
    (the positive-label counts in the ledger), the capped gap reported."""
    res = runner.invoke(app, _args(csvs, "--constraints", "opportunity", "--aggregate",
                                   "always", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["aggregated"] is True and out["score_resolution"] == 2.0**-15
    assert out["constraints"] == "equal_opportunity"
    assert out["test_abs_eod"] is not None and 0.0 <= out["test_abs_eod"] <= 1.0
    assert out["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    assert any("positive-label counts" in label for label in _labels(out))
    mem = json.loads(runner.invoke(app, _args(csvs, "--constraints", "opportunity",
                                              "--aggregate", "never", "--json")).stdout)
    assert _labels(mem) == _labels(out)  # the same releases charged on both paths


def test_raise_on_uncertified_exits_2_without_a_model_and_charges(csvs, tmp_path):
    ledger = tmp_path / "train.ledger"
    init = runner.invoke(app, ["ledger", "init", str(ledger), "--data",
                               str(csvs / "train.csv"), "--epsilon", "5", "--delta", "1e-6"])
    assert init.exit_code == 0, init.output
    model = tmp_path / "m.json"
    # alpha = 0.001 cannot be certified at n = 12,000, epsilon = 1
    res = runner.invoke(app, _args(csvs, "--uncertified", "raise", "--ledger", str(ledger),
                                   "--save-model", str(model), alpha="0.001"))
    assert res.exit_code == 2, res.output
    assert "certif" in res.output.lower() and not model.exists()
    shown = json.loads(runner.invoke(app, ["ledger", "show", str(ledger), "--json"]).stdout)
    assert shown["spent"]["epsilon"] == pytest.approx(1.0)  # the budget is spent all the same


@pytest.mark.parametrize(("flag", "value"), [("--radius", "-1"), ("--radius", "wide"),
                                             ("--estimator", "forest"),
                                             ("--uncertified", "ignore"),
                                             ("--constraints", "fairness"),
                                             ("--cal-share", "most"),
                                             ("--cal-share", "0.95")])
def test_bad_option_is_one_line_and_charges_nothing(csvs, tmp_path, flag, value):
    ledger = tmp_path / "train.ledger"
    runner.invoke(app, ["ledger", "init", str(ledger), "--data", str(csvs / "train.csv"),
                        "--epsilon", "5", "--delta", "1e-6"])
    res = runner.invoke(app, _args(csvs, flag, value, "--ledger", str(ledger)))
    assert res.exit_code == 2, res.output
    assert value in res.output
    shown = json.loads(runner.invoke(app, ["ledger", "show", str(ledger), "--json"]).stdout)
    assert shown["spent"]["epsilon"] == 0.0


def test_calibration_share_moves_rows_to_the_check_and_auto_follows_the_plan(csvs):
    """``--cal-share 0.7`` fits with 70% of TRAIN in S2 (the check's denominators grow),
    ``auto`` is the planner's choice from public numbers, and a plan prints the share."""
    from dpfair.fairclass import plan_certification

    half = json.loads(runner.invoke(app, _args(csvs, "--json")).stdout)
    res = runner.invoke(app, _args(csvs, "--cal-share", "0.7", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    # more calibration rows: a smaller margin t (a function of the released group sizes)
    assert out["certificates"][0]["margin"] < 0.95 * half["certificates"][0]["margin"]
    # auto: the plan's share at this public n and alpha, the same fit as passing it
    planned = plan_certification(12000, 1.0, 1e-8, 0.3, 0.05, calibration_share="auto",
                                 alpha=0.04, target_rate=0.9).calibration_share
    assert planned > 0.5
    auto = runner.invoke(app, _args(csvs, "--cal-share", "auto", "--min-share", "0.3",
                                    "--json", alpha="0.04"))
    assert auto.exit_code == 0, auto.output
    same = runner.invoke(app, _args(csvs, "--cal-share", str(planned), "--json",
                                    alpha="0.04"))
    assert json.loads(auto.stdout)["certificates"] == json.loads(same.stdout)["certificates"]
    missing = runner.invoke(app, _args(csvs, "--cal-share", "auto"))
    assert missing.exit_code == 2 and "--min-share" in missing.output
    plan = runner.invoke(app, _args(csvs, "--plan", "--min-share", "0.3",
                                    "--cal-share", "0.7", "--json"))
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["calibration_share"] == pytest.approx(0.7)

"""``dpfair fair-classify --plan``: the certification plan, no data read but the row count."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from dpfair.cli.fairclass import register
from dpfair.fairclass import plan_certification


@pytest.fixture(scope="module")
def app():
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """dpfair (test harness)."""

    register(app)
    return app


def _args(train, *extra):
    return ["fair-classify", str(train), str(train.parent / "absent-test.csv"), "--target", "y",
            "--sensitive", "a", "--features", "x1", "x2", "--bounds", "0", "1", "0", "1",
            "--epsilon", "1", "--delta", "1e-7", "--alpha", "0.1", "--plan", *extra]


def test_plan_prints_the_planner_and_fits_nothing(app, tmp_path):
    train = tmp_path / "train.csv"
    rng = np.random.default_rng(0)
    block = np.column_stack([rng.uniform(size=(6000, 2)), rng.integers(0, 2, (6000, 2))])
    np.savetxt(train, block, delimiter=",", header="x1,x2,y,a", comments="", fmt="%g")
    res = CliRunner().invoke(app, _args(train, "--min-share", "0.4", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    want = plan_certification(6000, 1.0, 1e-7, 0.4)
    assert out["n"] == 6000
    assert out["margin"] == pytest.approx(want.margin)
    assert out["min_alpha"] == pytest.approx(want.min_alpha)
    assert out["certification_probability"] == pytest.approx(want.certification_probability(0.1))
    # No ledger was created next to TRAIN, TEST was never opened (it does not exist).
    assert not list(tmp_path.glob("*.ledger*"))
    table = CliRunner().invoke(app, _args(train, "--min-share", "0.4"))
    assert table.exit_code == 0 and "min alpha" in table.output and "margin t" in table.output


def test_plan_needs_the_public_share(app, tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("x1,x2,y,a\n0.1,0.2,1,0\n")
    res = CliRunner().invoke(app, _args(train))
    assert res.exit_code != 0
    assert "--min-share" in res.output


def test_plan_follows_constraints(app, tmp_path):
    """--plan --constraints opportunity plans the equal-opportunity certificate (its share
    is P(A = a, Y = 1)), not the demographic-parity one."""
    train = tmp_path / "train.csv"
    rng = np.random.default_rng(0)
    block = np.column_stack([rng.uniform(size=(6000, 2)), rng.integers(0, 2, (6000, 2))])
    np.savetxt(train, block, delimiter=",", header="x1,x2,y,a", comments="", fmt="%g")
    res = CliRunner().invoke(app, _args(train, "--min-share", "0.2", "--constraints",
                                        "opportunity", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    want = plan_certification(6000, 1.0, 1e-7, 0.2, constraints="equal_opportunity")
    assert out["constraints"] == "equal_opportunity"
    assert out["margin"] == pytest.approx(want.margin)
    assert out["margin"] > plan_certification(6000, 1.0, 1e-7, 0.2).margin
    bad = CliRunner().invoke(app, _args(train, "--constraints", "opportunity"))
    assert bad.exit_code != 0 and "P(A = a, Y = 1)" in bad.output

"""CLI command ``facility`` (registered on a Typer app)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from dpfair.cli.facility import register
from dpfair.facility import DPExpMed

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root (keeps sub-command names)."""

    register(app)
    return app


APP = _app()


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    x = np.random.default_rng(0).triangular(0.0, 0.5, 1.0, 501)
    path = tmp_path_factory.mktemp("fac") / "agents.csv"
    path.write_text("id,loc\n" + "".join(f"{i},{float(v)!r}\n" for i, v in enumerate(x)))
    return path


def _args(path: Path, *extra: str) -> list[str]:
    return ["facility", str(path), "--column", "loc", "--epsilon", "1", "--domain", "0", "1",
            *extra]


def test_json_output_and_reproducibility(csv_file: Path) -> None:
    res = runner.invoke(APP, _args(csv_file, "--seed", "3", "--json"))
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert 0 <= out["location"] <= 1 and out["n"] == 501
    assert out["privacy"]["kind"] == "pure" and out["privacy"]["epsilon"] == 1.0
    assert out["widening"] == pytest.approx(1 / 501) and out["widening_rule"] == "1/(n*epsilon)"
    assert "metrics" not in out
    x = np.loadtxt(csv_file, delimiter=",", skiprows=1)[:, 1]
    # --seed opens the session for reproduction: release 0 draws from stream 0 of the seed
    stream = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(0,)))
    assert out["location"] == DPExpMed(1.0, (0, 1)).sample(x, rng=stream)
    assert "--seed" in res.stderr  # warned
    again = json.loads(runner.invoke(APP, _args(csv_file, "--seed", "3", "--json")).stdout)
    assert again["location"] == out["location"]


def test_report_metrics_and_widening(csv_file: Path) -> None:
    res = runner.invoke(APP, _args(csv_file, "--seed", "1", "--json", "--report-metrics",
                                   "--widening", "0.01"))
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    m = out["metrics"]
    assert out["widening"] == 0.01 and out["widening_rule"] == "given"
    assert 0 < m["expected_fair"] < m["fair_quantile"] < 0.1
    assert 0 < m["expected_swdiff"] and "not differentially private" in m["note"]


def test_table_output(csv_file: Path) -> None:
    res = runner.invoke(APP, _args(csv_file, "--report-metrics"))
    assert res.exit_code == 0, res.stderr
    assert "location" in res.stdout and "E[FAIR] (not private)" in res.stdout
    assert "1-DP" in res.stdout


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (["--epsilon", "0"], "epsilon=0.0"),
        (["--domain", "1", "0"], "domain=(1.0, 0.0)"),
        (["--widening", "-1"], "widening=-1.0"),
        (["--column", "nope"], "column='nope'"),
    ],
)
def test_user_errors_exit_2_with_one_line(csv_file: Path, change: list[str], pattern: str) -> None:
    args = _args(csv_file)
    flag = change[0]
    if flag in args:
        i = args.index(flag)
        args[i : i + len(change)] = change
    else:
        args += change
    res = runner.invoke(APP, args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr.startswith("dpfair: error:") and res.stderr.count("\n") == 1
    assert pattern in res.stderr, res.stderr


def test_locations_outside_the_domain_are_clamped_not_named(csv_file: Path) -> None:
    """A refusal naming out-of-domain records would release them: the session clamps."""
    args = _args(csv_file, "--json")
    i = args.index("--domain")
    args[i : i + 3] = ["--domain", "0", "0.5"]
    res = runner.invoke(APP, args)
    assert res.exit_code == 0, res.stderr
    assert 0 <= json.loads(res.stdout)["location"] <= 0.5


def test_missing_file(tmp_path: Path) -> None:
    res = runner.invoke(APP, _args(tmp_path / "none.csv"))
    assert res.exit_code == 2 and "no such file" in res.stderr


def test_help() -> None:
    for cmd in ("facility",):
        res = runner.invoke(APP, [cmd, "--help"])
        assert res.exit_code == 0 and "--" in res.stdout

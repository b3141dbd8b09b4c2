"""The `dpfair` command line: output formats, exit codes and one-line error messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dpfair
from dpfair.cli import app
from dpfair.data.synthetic import lognormal_sample

runner = CliRunner()


@pytest.fixture(scope="module")
def data_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same log-normal sample (paper design, n = 1000) as CSV and as Parquet."""
    root = tmp_path_factory.mktemp("cli")
    x = lognormal_sample(1000, sigma=1.0, rng=20240501)
    ids = np.arange(x.size)
    csv_path = root / "sample.csv"
    csv_path.write_text(
        "id,income,label\n"
        + "".join(
            f"{i},{float(v)!r},{'a' if i % 2 else 'b'}\n" for i, v in zip(ids, x, strict=True)
        )
    )
    pq_path = root / "sample.parquet"
    pq.write_table(
        pa.table({"id": ids, "income": x, "label": ["a" if i % 2 else "b" for i in ids]}), pq_path
    )
    nan_path = root / "with_nan.csv"
    nan_path.write_text("income\n1.0\nnan\n2.5\n3.0\n")
    return {"csv": csv_path, "parquet": pq_path, "nan": nan_path}


def _median_ci(path: Path, *extra: str, column: str = "income") -> list[str]:
    return [
        "median-ci",
        str(path),
        "--column",
        column,
        "--rho",
        "0.5",
        "--bounds",
        "-5",
        "15",
        *extra,
    ]


def _run_json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


# --------------------------------------------------------------------------- success paths
@pytest.mark.parametrize("method", ["expmech", "cdf", "binsearch", "binsearch_cdf"])
def test_json_output_parses_and_reports_privacy(data_files: dict[str, Path], method: str) -> None:
    out = _run_json(_median_ci(data_files["csv"], "--method", method, "--seed", "1", "--json"))
    assert out["method"] == method
    assert -5 <= out["low"] <= out["estimate"] <= out["high"] <= 15
    assert out["n"] == 1000
    assert out["alpha"] == pytest.approx(0.05)
    assert out["privacy"]["kind"] == "zcdp"
    assert out["privacy"]["rho"] == pytest.approx(0.5, rel=1e-9)
    assert out["input"] == {"path": str(data_files["csv"]), "column": "income"}
    assert out["seed"] == 1


def test_json_never_contains_the_nonprivate_interval(data_files: dict[str, Path]) -> None:
    args = _median_ci(data_files["csv"], "--seed", "0", "--json")
    out = _run_json(args)
    text = json.dumps(out)
    for key in ("nonprivate", "k_low", "k_high", '"private": false'):
        assert key not in text


def test_csv_and_parquet_give_the_same_answer(data_files: dict[str, Path]) -> None:
    a = _run_json(_median_ci(data_files["csv"], "--seed", "7", "--json"))
    b = _run_json(_median_ci(data_files["parquet"], "--seed", "7", "--json"))
    for key in ("low", "high", "estimate", "n"):
        assert a[key] == b[key]


def test_seed_makes_output_reproducible(data_files: dict[str, Path]) -> None:
    args = _median_ci(data_files["parquet"], "--method", "cdf", "--seed", "3", "--json")
    assert _run_json(args) == _run_json(args)


def test_alpha_and_granularity_are_passed_through(data_files: dict[str, Path]) -> None:
    out = _run_json(
        _median_ci(
            data_files["csv"], "--alpha", "0.1", "--granularity", "0.01", "--seed", "0", "--json"
        )
    )
    assert out["alpha"] == pytest.approx(0.1)
    assert out["granularity"] == pytest.approx(0.01)


def test_table_output(data_files: dict[str, Path]) -> None:
    result = runner.invoke(app, _median_ci(data_files["csv"], "--seed", "0"))
    assert result.exit_code == 0, result.stderr
    assert "privacy spent" in result.stdout
    assert "0.5-zCDP" in result.stdout
    assert "0.95 CI" in result.stdout
    assert re.search(r"│ n +│ 1000 ", result.stdout)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["median-ci", "--help"], ["report", "--help"]],
    ids=["root", "median-ci", "report"],
)
def test_help_on_every_command(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert "Usage" in result.stdout


def test_median_ci_help_explains_public_bounds() -> None:
    result = runner.invoke(app, ["median-ci", "--help"])
    for flag in (
        "--column",
        "--rho",
        "--bounds",
        "--alpha",
        "--method",
        "--granularity",
        "--seed",
        "--json",
    ):
        assert flag in result.stdout


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"dpfair {dpfair.__version__}"


def test_report_command_passes_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dpfair.report

    calls: list[dict[str, Any]] = []

    def fake_build_report(out: Path, *, quick: bool, seed: int, progress: Any) -> Path:
        calls.append({"out": out, "quick": quick, "seed": seed})
        return Path(out) / "index.html"

    monkeypatch.setattr(dpfair.report, "build_report", fake_build_report)
    result = runner.invoke(app, ["report", "--quick", "--out", str(tmp_path), "--seed", "4"])
    assert result.exit_code == 0, result.stderr
    assert calls == [{"out": tmp_path, "quick": True, "seed": 4}]
    assert result.stdout.strip() == str(tmp_path / "index.html")


# --------------------------------------------------------------------------- user errors
def _assert_user_error(args: list[str], *patterns: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for pattern in patterns:
        assert pattern in result.stderr, result.stderr
    return result.stderr


def test_missing_column(data_files: dict[str, Path]) -> None:
    err = _assert_user_error(
        _median_ci(data_files["csv"], column="salary"), "column='salary'", "'income'"
    )
    assert err.startswith("dpfair: error:") and err.count("\n") == 1


def test_missing_file(tmp_path: Path) -> None:
    _assert_user_error(_median_ci(tmp_path / "nope.csv"), "no such file", "nope.csv")


def test_non_numeric_column(data_files: dict[str, Path]) -> None:
    _assert_user_error(_median_ci(data_files["parquet"], column="label"), "column='label'")


def test_nan_in_data(data_files: dict[str, Path]) -> None:
    _assert_user_error(_median_ci(data_files["nan"]), "NaN", "column='income'")


def test_bounds_lo_not_below_hi(data_files: dict[str, Path]) -> None:
    args = [
        "median-ci",
        str(data_files["csv"]),
        "--column",
        "income",
        "--rho",
        "0.5",
        "--bounds",
        "15",
        "-5",
    ]
    _assert_user_error(args, "bounds=")
    args[-2:] = ["3", "3"]
    _assert_user_error(args, "bounds=")


def test_unknown_method(data_files: dict[str, Path]) -> None:
    _assert_user_error(_median_ci(data_files["csv"], "--method", "median"), "method='median'")


@pytest.mark.parametrize(
    ("flag", "value", "name"),
    [
        ("--rho", "0", "rho="),
        ("--rho", "-1", "rho="),
        ("--alpha", "1.5", "alpha="),
        ("--granularity", "-0.1", "granularity="),
    ],
)
def test_bad_numbers(data_files: dict[str, Path], flag: str, value: str, name: str) -> None:
    args = _median_ci(data_files["csv"])
    if flag == "--rho":
        args[args.index("--rho") + 1] = value
    else:
        args += [flag, value]
    _assert_user_error(args, name)


def test_missing_required_option(data_files: dict[str, Path]) -> None:
    result = runner.invoke(app, ["median-ci", str(data_files["csv"]), "--column", "income"])
    assert result.exit_code == 2
    assert "--rho" in result.stderr or "--bounds" in result.stderr


def test_main_entry_point_exit_code_and_no_traceback(data_files: dict[str, Path]) -> None:
    """The real console entry point, in a subprocess: stderr is one line, exit code 2."""
    code = "from dpfair.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, *_median_ci(data_files["csv"], column="Income")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "column='Income'" in lines[0] and "Did you mean 'income'?" in lines[0]


def test_main_success_in_subprocess(data_files: dict[str, Path]) -> None:
    code = "from dpfair.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, *_median_ci(data_files["parquet"], "--seed", "2", "--json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["privacy"]["rho"] == pytest.approx(0.5)

"""A path that exists is read as that file: DuckDB glob characters in names are literal.

``data[2023].csv`` must not read a sibling ``data2.csv``, and ``week?.csv`` must not also
read ``week1.csv`` — through every command that hands a path to DuckDB, in memory and out
of core (``--aggregate always``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair.cli import app
from dpfair.fairclass.datasets import simulate

runner = CliRunner()


def _column(path: Path, name: str, values: np.ndarray) -> Path:
    path.write_text(name + "\n" + "".join(f"{float(v)!r}\n" for v in values))
    return path


@pytest.fixture()
def tricky(tmp_path: Path) -> dict[str, Path]:
    """Files whose names are DuckDB globs, each beside a decoy the glob would also match."""
    rng = np.random.default_rng(7)
    files = {
        "brackets": _column(tmp_path / "data[2023].csv", "x", rng.uniform(0, 10, 37)),
        "question": _column(tmp_path / "week?.csv", "x", rng.uniform(0, 10, 41)),
        "star": _column(tmp_path / "all*.csv", "x", rng.uniform(0, 10, 43)),
    }
    _column(tmp_path / "data2.csv", "x", rng.uniform(0, 10, 301))  # matches data[2023].csv
    _column(tmp_path / "week1.csv", "x", rng.uniform(0, 10, 5))  # matches week?.csv
    _column(tmp_path / "all-more.csv", "x", rng.uniform(0, 10, 7))  # matches all*.csv
    return files


EXPECTED_N = {"brackets": 37, "question": 41, "star": 43}


@pytest.mark.parametrize("kind", sorted(EXPECTED_N))
@pytest.mark.parametrize("aggregate", ["never", "always"])
def test_median_ci_reads_the_named_file_only(
    tricky: dict[str, Path], kind: str, aggregate: str
) -> None:
    res = runner.invoke(
        app,
        ["median-ci", str(tricky[kind]), "-c", "x", "--rho", "1", "--bounds", "0", "10",
         "--seed", "1", "--json", "--aggregate", aggregate],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == EXPECTED_N[kind]


@pytest.mark.parametrize("kind", sorted(EXPECTED_N))
def test_facility_reads_the_named_file_only(tricky: dict[str, Path], kind: str) -> None:
    res = runner.invoke(
        app,
        ["facility", str(tricky[kind]), "-c", "x", "--epsilon", "1", "--domain", "0", "10",
         "--seed", "1", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == EXPECTED_N[kind]


def test_question_mark_in_column_name_with_aggregate_always(tmp_path: Path) -> None:
    # The SQL text used to be rewritten with replace("?", ...): a column 'q?m' broke it.
    path = _column(tmp_path / "q.csv", "q?m", np.linspace(1, 9, 400))
    res = runner.invoke(
        app,
        ["median-ci", str(path), "-c", "q?m", "--rho", "1", "--bounds", "0", "10", "--seed",
         "2", "--json", "--aggregate", "always"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == 400


def test_gzip_csv_with_question_mark_in_name(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "w?.csv.gz"
    path.write_bytes(gzip.compress(b"x\n" + b"".join(b"%d\n" % (i % 9 + 1) for i in range(300))))
    res = runner.invoke(
        app,
        ["median-ci", str(path), "-c", "x", "--rho", "1", "--bounds", "0", "10", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == 300


def test_hive_style_directory_adds_no_column(tmp_path: Path) -> None:
    folder = tmp_path / "x=1"
    folder.mkdir()
    path = _column(folder / "f.csv", "y", np.arange(1.0, 6.0))
    from dpfair.data import list_columns

    assert list(list_columns(path)) == ["y"]


def test_missing_glob_path_is_not_expanded(tricky: dict[str, Path]) -> None:
    pattern = tricky["brackets"].parent / "data?.csv"  # would match data2.csv as a glob
    res = runner.invoke(
        app, ["median-ci", str(pattern), "-c", "x", "--rho", "1", "--bounds", "0", "10"]
    )
    assert res.exit_code == 2
    assert "no such file" in res.stderr and "not expanded" in res.stderr


def _fair_csv(path: Path, n: int, seed: int) -> Path:
    d = simulate(n, rng=seed)
    np.savetxt(path, np.column_stack([d.X, d.A, d.y]), delimiter=",", header="x1,x2,a,y",
               comments="", fmt="%.12g")
    return path


@pytest.fixture(scope="module")
def fair_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fair")
    return {
        "train": _fair_csv(root / "train[1].csv", 3000, 1),
        "decoy": _fair_csv(root / "train1.csv", 1500, 2),
        "test": _fair_csv(root / "test?.csv", 1000, 3),
        "test_decoy": _fair_csv(root / "testX.csv", 500, 4),
    }


@pytest.mark.parametrize("aggregate", ["never", "always"])
def test_fair_classify_reads_the_named_files_only(
    fair_files: dict[str, Path], aggregate: str
) -> None:
    res = runner.invoke(
        app,
        ["fair-classify", str(fair_files["train"]), str(fair_files["test"]), "--target", "y",
         "--sensitive", "a", "--features", "x1", "x2", "--bounds", "0", "1", "0", "1",
         "--epsilon", "2", "--delta", "1e-6", "--alpha", "0.2", "--seed", "0", "--json",
         "--aggregate", aggregate],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["n_train"], out["n_test"]) == (3000, 1000)


@pytest.mark.parametrize("aggregate", ["never", "always"])
def test_fdp_site_reads_the_named_file_only(
    fair_files: dict[str, Path], tmp_path: Path, aggregate: str
) -> None:
    setup = tmp_path / "setup.json"
    keys = tmp_path / "keys"
    keys.mkdir()
    for party in ("centre", "s1"):
        res = runner.invoke(app, ["fdp", "keygen", "--out", str(keys / party)])
        assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        ["fdp", "centre", "setup", "--key", str(keys / "centre.key"), "--site",
         "s1:3000:4:1e-6", "--site-key", f"s1={keys / 's1.pub'}", "--bounds", "0",
         "--bounds", "1", "--bounds", "0", "--bounds", "1", "--alpha", "0.2", "--out",
         str(setup)],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        ["fdp", "site", "round1", str(fair_files["train"]), "--setup", str(setup),
         "--site-id", "s1", "--key", str(keys / "s1.key"), "--centre-key",
         str(keys / "centre.pub"), "--features", "x1,x2", "--target", "y", "--sensitive",
         "a", "--state", str(tmp_path / "state.json"), "--out", str(tmp_path / "r1.json"),
         "--max-epsilon", "4", "--max-delta", "1e-6", "--aggregate", aggregate],
    )
    # The centre's setup declares n = 3000 for this site; the decoy train1.csv has 1500 rows.
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r1.json").is_file()

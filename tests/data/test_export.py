"""``dpfair.data.export_dataset`` and ``dpfair datasets``: verbatim rows, seeded splits."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair import InvalidParameterError
from dpfair.cli import app
from dpfair.data import export_dataset, read_column
from dpfair.data.export import write_csv


def _bundled_rows(resource: str) -> list[str]:
    with resources.files("dpfair").joinpath(resource).open("rb") as raw:
        return gzip.decompress(raw.read()).decode().splitlines()


def test_split_is_a_seeded_partition_of_the_verbatim_rows(tmp_path: Path) -> None:
    files = export_dataset("adult", tmp_path / "a", split=0.7, seed=3)
    original = _bundled_rows("data/bundled/adult_xue_yu.csv.gz")
    train = files["train"].read_text().splitlines()
    test = files["test"].read_text().splitlines()
    assert train[0] == test[0] == original[0]  # the header
    assert len(train) - 1 == round(0.7 * (len(original) - 1))
    assert sorted(train[1:] + test[1:]) == sorted(original[1:])
    again = export_dataset("adult", tmp_path / "b", split=0.7, seed=3)
    assert again["train"].read_text() == files["train"].read_text()
    other = export_dataset("adult", tmp_path / "c", split=0.7, seed=4)
    assert other["train"].read_text() != files["train"].read_text()


def test_whole_export_reads_back(tmp_path: Path) -> None:
    path = export_dataset("adult_age", tmp_path)["adult_age"]
    assert read_column(path, "age").shape == (48842,)


@pytest.mark.parametrize(
    ("name", "split"), [("nope", None), ("adult", 0.0), ("adult", 1.0), ("adult", 1e-9)]
)
def test_bad_requests(tmp_path: Path, name: str, split: float | None) -> None:
    with pytest.raises(InvalidParameterError):
        export_dataset(name, tmp_path, split=split)


def test_write_csv_is_exact(tmp_path: Path) -> None:
    values = np.array([[0.1, 1.0], [1 / 3, -2.0]])
    path = write_csv(tmp_path / "t.csv", ["u", "v"], values)
    assert path.read_text() == f"u,v\n0.1,1\n{1 / 3!r},-2\n"
    with pytest.raises(InvalidParameterError):
        write_csv(tmp_path / "bad.csv", ["u"], values)


def test_simulate_command_writes_sites_and_test(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["datasets", "simulate", "--sites", "2", "--n", "50", "--test-n", "30",
              "--out", str(tmp_path), "--json"]
    )
    assert res.exit_code == 0, res.output
    files = json.loads(res.stdout)["files"]
    assert sorted(files) == ["h1", "h2", "test"]
    assert len(Path(files["h1"]).read_text().splitlines()) == 51
    assert Path(files["test"]).read_text().splitlines()[0] == "x1,x2,a,y"
    assert Path(files["h1"]).read_text() != Path(files["h2"]).read_text()

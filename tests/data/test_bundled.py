"""Bundled data sets: present, small, licensed, and faithful to their source."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from dpfair import InvalidParameterError
from dpfair.data import BUNDLED, bundled_path, load_bundled


def test_adult_age_loads() -> None:
    age = load_bundled("adult_age")
    assert age.dtype == np.float64
    assert age.shape == (48_842,)
    assert np.all(np.isfinite(age))
    assert np.all(age == np.round(age))  # whole years
    lo, hi = BUNDLED["adult_age"].bounds
    assert lo <= age.min() and age.max() <= hi


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_files_are_small_and_attributed(name: str) -> None:
    entry = BUNDLED[name]
    path = bundled_path(name)
    assert path.stat().st_size < 200_000
    attribution = path.parent / entry.attribution
    text = attribution.read_text(encoding="utf-8")
    assert "CC BY 4.0" in text
    assert "Changes made" in text


def test_unknown_bundled_name() -> None:
    with pytest.raises(InvalidParameterError, match=r"name='census'.*'adult_age'"):
        load_bundled("census")


def test_adult_age_matches_shared_source(shared_data: Path) -> None:
    """The bundled column is the source's Age column, row for row."""
    source = shared_data / "adult_xue_yu.csv"
    if not source.is_file():
        pytest.skip(f"{source} not present")
    with source.open(newline="") as fh:
        expected = np.array([float(row["Age"]) for row in csv.DictReader(fh)])
    np.testing.assert_array_equal(load_bundled("adult_age"), expected)

"""dpfair.data.read_column: CSV and Parquet through DuckDB, and every way input goes wrong."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfair import InvalidDataError, InvalidParameterError
from dpfair.data import detect_format, list_columns, read_column


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    path.write_text("id,age,name,score\n1,30,ann,1.5\n2,41,bob,-2.25\n3,25,cy,0\n")
    return path


@pytest.fixture
def parquet_file(tmp_path: Path) -> Path:
    path = tmp_path / "people.parquet"
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "age": pa.array([30, 41, 25], pa.int16()),
            "name": pa.array(["ann", "bob", "cy"]),
            "score": pa.array([1.5, -2.25, 0.0], pa.float32()),
        }
    )
    pq.write_table(table, path)
    return path


def test_csv_integer_column_is_float64(csv_file: Path) -> None:
    x = read_column(csv_file, "age")
    assert x.dtype == np.float64
    np.testing.assert_array_equal(x, [30.0, 41.0, 25.0])


def test_parquet_and_csv_agree(csv_file: Path, parquet_file: Path) -> None:
    for col in ("age", "score"):
        np.testing.assert_array_equal(read_column(csv_file, col), read_column(parquet_file, col))
    assert detect_format(parquet_file) == "parquet"
    assert detect_format(csv_file) == "csv"


def test_format_detected_by_content_not_name(parquet_file: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "data.bin"
    renamed.write_bytes(parquet_file.read_bytes())
    np.testing.assert_array_equal(read_column(renamed, "age"), [30.0, 41.0, 25.0])


def test_gzip_csv(tmp_path: Path) -> None:
    path = tmp_path / "x.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("v\n" + "\n".join(str(i) for i in range(100)) + "\n")
    x = read_column(path, "v")
    np.testing.assert_array_equal(x, np.arange(100.0))


def test_decimal_and_unusual_column_names(tmp_path: Path) -> None:
    path = tmp_path / "odd.parquet"
    table = pa.table(
        {
            'we"ird name': pa.array([1, 2], pa.int8()),
            "dec": pa.array([1, 2], pa.decimal128(10, 3)),
        }
    )
    pq.write_table(table, path)
    np.testing.assert_array_equal(read_column(path, 'we"ird name'), [1.0, 2.0])
    np.testing.assert_array_equal(read_column(path, "dec"), [1.0, 2.0])


def test_list_columns(csv_file: Path) -> None:
    cols = list_columns(csv_file)
    assert list(cols) == ["id", "age", "name", "score"]
    assert cols["name"] == "VARCHAR"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"path=.*nope\.csv.*no such file"):
        read_column(tmp_path / "nope.csv", "age")


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"not a regular file"):
        read_column(tmp_path, "age")


def test_missing_column_lists_available(csv_file: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"column='salary'.*'id', 'age', 'name'"):
        read_column(csv_file, "salary")


def test_missing_column_suggests_case_fix(csv_file: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"Did you mean 'age'\?"):
        read_column(csv_file, "Age")


def test_non_numeric_column(csv_file: Path, parquet_file: Path) -> None:
    with pytest.raises(InvalidDataError, match=r"column='name'.*VARCHAR.*numeric"):
        read_column(csv_file, "name")
    with pytest.raises(InvalidDataError, match=r"column='name'.*numeric"):
        read_column(parquet_file, "name")


def test_missing_marker_strings_are_named(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("age\n30\n?\n41\n")
    with pytest.raises(InvalidDataError, match=r"column='age'.*'\?'"):
        read_column(path, "age")


def test_nulls_counted_never_dropped(tmp_path: Path) -> None:
    path = tmp_path / "nulls.csv"
    path.write_text("a,b\n1,2\n,3\n4,\n,5\n")
    with pytest.raises(InvalidDataError, match=r"column='a': 2 of 4 rows are missing"):
        read_column(path, "a")
    pq_path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"a": pa.array([1.0, None, 3.0])}), pq_path)
    with pytest.raises(InvalidDataError, match=r"1 of 3 rows are missing"):
        read_column(pq_path, "a")


def test_nan_and_inf_counted(tmp_path: Path) -> None:
    path = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"a": pa.array([1.0, np.nan, np.inf, -np.inf, np.nan])}), path)
    with pytest.raises(InvalidDataError, match=r"column='a': 2 NaN and 2 infinite"):
        read_column(path, "a")
    csv_path = tmp_path / "nan.csv"
    csv_path.write_text("a\n1.0\nnan\n2.0\n")
    with pytest.raises(InvalidDataError, match=r"1 NaN and 0 infinite"):
        read_column(csv_path, "a")


def test_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"a": pa.array([], pa.float64())}), path)
    with pytest.raises(InvalidDataError, match=r"column='a'.*no rows"):
        read_column(path, "a")


def test_empty_file_and_header_only(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InvalidDataError, match=r"the file is empty"):
        read_column(empty, "a")
    header = tmp_path / "header.csv"
    header.write_text("a,b\n")
    with pytest.raises(InvalidDataError, match=r"column='a'.*no rows"):
        read_column(header, "a")
    blank = tmp_path / "blank.csv"
    blank.write_text("a,b\n,1\n,2\n")
    with pytest.raises(InvalidDataError, match=r"column='a': .*2 rows are missing"):
        read_column(blank, "a")


def test_unparseable_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    with pytest.raises(InvalidDataError, match=r"could not be read as PARQUET"):
        read_column(path, "a")


def test_bad_arguments(csv_file: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"column=''"):
        read_column(csv_file, "")
    with pytest.raises(InvalidParameterError, match=r"format='xlsx'"):
        read_column(csv_file, "age", format="xlsx")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"path=3"):
        read_column(3, "age")  # type: ignore[arg-type]


def test_errors_are_value_errors(csv_file: Path) -> None:
    with pytest.raises(ValueError):
        read_column(csv_file, "missing")
